"""The Restate server fixture survives a port another process took between pick and bind."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from backend_adapters.restate.dev_server import RestateServer
from console.processes import PortTaken
from tests.support.held_port import held_port


def test_a_first_start_on_a_port_taken_meanwhile_moves_to_fresh_ports(tmp_path: Path) -> None:
    server = RestateServer(base_dir=tmp_path / "server")
    with held_port() as port:
        server.admin_port = port
        try:
            server.start()
            assert server.admin_port != port
            # the moved server is usable and restarts on its own (new) ports
            server.stop()
            server.start()
            assert httpx.get(f"{server.admin_url}/health", timeout=5).status_code == 200
        finally:
            server.stop()


def test_a_restart_keeps_its_ports_and_says_when_one_is_taken(tmp_path: Path) -> None:
    server = RestateServer(base_dir=tmp_path / "server")
    server.start()
    server.stop()
    with held_port() as port:
        server.ingress_port = port
        with pytest.raises(PortTaken, match="in use"):
            server.start()
        assert server.ingress_port == port
