"""TUI fixtures: a real gateway + real DBOS demo fleet (subprocesses, shared by the module),
and helpers to drive the app with Pilot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.live_fleet import LiveFleet


@pytest.fixture(scope="session")
def live_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveFleet]:
    """``irq serve`` + 20 DBOS agents on SQLite (every kind of interrupt twice or more)."""
    home = tmp_path_factory.mktemp("irq-home")
    with LiveFleet(home, agents=20, workers=2, step_scale=1.0) as fleet:
        yield fleet


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IRQ_HOME", str(tmp_path))
    for var in ("IRQ_URL", "IRQ_TOKEN", "IRQ_CONTEXT", "IRQ_ASCII", "IRQ_THEME", "NO_COLOR"):
        monkeypatch.delenv(var, raising=False)

