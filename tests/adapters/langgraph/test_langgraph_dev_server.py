"""The Agent Server fixture survives a port another process took between pick and bind."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph_scenarios import prepare_server_dir

from backend_adapters.langgraph.dev_server import AgentServer
from console.processes import PortTaken
from tests.support.held_port import held_port


def test_a_port_taken_before_the_first_start_is_replaced_and_a_chosen_one_is_not(
    tmp_path: Path,
) -> None:
    with held_port() as port:
        fixed = AgentServer(prepare_server_dir(tmp_path / "fixed"), port=port, ports_fixed=True)
        with pytest.raises(PortTaken, match=f"did not take port {port}"):
            fixed.start()
        assert fixed.child is None  # stopped, not left on the port the CLI moved to

        moved = AgentServer(prepare_server_dir(tmp_path / "moved"), port=port)
        moved.start()
        try:
            assert moved.port != port
            assert moved.answers()
        finally:
            moved.stop()
