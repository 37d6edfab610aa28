"""What the servers irq starts say when their port was taken (read to move to fresh ports)."""

from __future__ import annotations

import pytest

from console.processes import distinct_free_ports, port_taken


@pytest.mark.parametrize(
    "said",
    [
        # temporal server start-dev (Go)
        "failed listening for HTTP API on 127.0.0.1:39307: listen tcp 127.0.0.1:39307: "
        "bind: address already in use",
        # restate-server (Rust)
        "Failed: [admin-api-server] failed binding to address '127.0.0.1:53203': "
        "Address in use (os error 98)",
        # irq serve
        "irq: cannot listen on 127.0.0.1:38235: the port is in use",
    ],
)
def test_each_servers_words_for_a_taken_port_are_read(said: str) -> None:
    assert port_taken(said)


@pytest.mark.parametrize(
    "said",
    ["connection refused", "permission denied", "database is locked", ""],
)
def test_other_exits_are_not_a_taken_port(said: str) -> None:
    assert not port_taken(said)


def test_distinct_free_ports_are_different_and_sorted() -> None:
    ports = distinct_free_ports(5)
    assert len(set(ports)) == 5
    assert list(ports) == sorted(ports)
