"""The dev server fixture survives a port another process took between pick and bind."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend_adapters.temporal.dev_server import DevServer
from console.processes import PortTaken
from tests.support.held_port import held_port


def test_a_first_start_on_a_port_taken_meanwhile_moves_to_fresh_ports(tmp_path: Path) -> None:
    with held_port() as port:
        server = DevServer(tmp_path / "temporal", http_port=port)
        try:
            server.start()
            assert server.http_port != port
            assert server.answers()
        finally:
            server.stop()
        assert "address already in use" in (tmp_path / "temporal" / "server.log").read_text()


def test_a_restart_keeps_its_ports_and_says_when_one_is_taken(tmp_path: Path) -> None:
    server = DevServer(tmp_path / "temporal")
    server.start()
    server.stop()
    with held_port() as port:
        server.http_port = port
        with pytest.raises(PortTaken, match="address already in use"):
            server.start()
        assert server.http_port == port
