"""The Agent Server fixture survives a port another process took between pick and bind."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from langgraph_scenarios import prepare_server_dir

from backend_adapters.langgraph.dev_server import AgentServer
from console.processes import PortTaken


def test_a_port_taken_before_the_first_start_is_replaced_and_a_chosen_one_is_not(
    tmp_path: Path,
) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = int(held.getsockname()[1])

        fixed = AgentServer(prepare_server_dir(tmp_path / "fixed"), port=port, ports_fixed=True)
        with pytest.raises(PortTaken, match=f"did not take port {port}"):
            fixed.start()
        assert fixed.child is None  # stopped, not left on the port the CLI moved to

        moved = AgentServer(prepare_server_dir(tmp_path / "moved"), port=port)
        try:
            moved.start()
            assert moved.port != port
            assert moved.answers()
        finally:
            moved.stop()
