"""CLI fixtures: an isolated IRQ_HOME and a gateway served by ``irq serve`` (subprocess)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_harness import ENV_VARS, ServedGateway, start_gateway

from console.processes import stop_process


@pytest.fixture
def irq_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """IRQ_HOME in a temporary directory; no connection settings leak in from outside."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("IRQ_HOME", str(home))
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def served_gateway(irq_home: Path) -> Iterator[ServedGateway]:
    """``irq serve`` with no backends, in a subprocess."""
    gw = start_gateway(irq_home)
    try:
        yield gw
    finally:
        stop_process(gw.process)
