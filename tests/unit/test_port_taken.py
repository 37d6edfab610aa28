"""What the servers irq starts say when their port was taken (read to move to fresh ports)."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest

from console import processes
from console.processes import (
    PICK_FLOOR,
    PortTaken,
    distinct_free_ports,
    ephemeral_ports,
    free_port,
    port_taken,
    start_on_fresh_ports,
    wait_until,
)


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


def test_a_free_port_is_below_the_range_client_connections_take_theirs_from() -> None:
    """A port from the ephemeral range can be taken by any outgoing connection between the
    pick and the bind (the CI failure on record: 42251, taken before irq serve bound it)."""
    low, _high = ephemeral_ports()
    ports = [free_port() for _ in range(50)]
    assert all(PICK_FLOOR <= port < low for port in ports)
    assert len(set(ports)) == 50


def test_a_port_someone_listens_on_is_passed_over() -> None:
    first = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", first + 1))
            sock.listen()
        except OSError:
            pass  # someone else holds it already: passed over just the same
        assert free_port() != first + 1


def test_too_small_a_range_below_falls_back_to_the_kernels_pick(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    low, high = ephemeral_ports()
    monkeypatch.setattr(processes, "ephemeral_ports", lambda: (PICK_FLOOR + 10, high))
    assert low <= free_port() <= high


Starts = tuple[list[int], list[int], Callable[[], None], Callable[[], None]]


def _starts(taken: int) -> Starts:
    """A server whose first ``taken`` starts meet a taken port: (ports tried, picks)."""
    tried: list[int] = []
    picks: list[int] = []
    port = [1000]

    def start_once() -> None:
        tried.append(port[0])
        if len(tried) <= taken:
            raise PortTaken(f"port {port[0]}: address already in use")

    def repick() -> None:
        port[0] += 1
        picks.append(port[0])

    return tried, picks, start_once, repick


def test_ports_picked_here_are_picked_again_until_a_start_binds() -> None:
    tried, picks, start_once, repick = _starts(taken=2)
    start_on_fresh_ports(start_once, repick, fixed=False, tries=3)
    assert tried == [1000, 1001, 1002] and picks == [1001, 1002]


def test_a_chosen_port_that_is_taken_is_an_error_not_a_move() -> None:
    tried, picks, start_once, repick = _starts(taken=1)
    with pytest.raises(PortTaken, match="port 1000"):
        start_on_fresh_ports(start_once, repick, fixed=True)
    assert tried == [1000] and picks == []


def test_the_last_try_says_the_port_was_taken() -> None:
    tried, picks, start_once, repick = _starts(taken=5)
    with pytest.raises(PortTaken, match="port 1002"):
        start_on_fresh_ports(start_once, repick, fixed=False, tries=3)
    assert tried == [1000, 1001, 1002]


def test_a_child_that_died_of_a_taken_port_is_reported_as_such_by_wait_until() -> None:
    with pytest.raises(PortTaken, match="os error 98"):
        wait_until(lambda: False, timeout_s=5, interval_s=0.01,
                   failed=lambda: "restate-server exited (1): Address in use (os error 98)")
    with pytest.raises(RuntimeError) as other:
        wait_until(lambda: False, timeout_s=5, interval_s=0.01,
                   failed=lambda: "restate-server exited (1): permission denied")
    assert not isinstance(other.value, PortTaken)


def test_what_the_start_returns_is_returned() -> None:
    assert start_on_fresh_ports(lambda: "served", lambda: None, fixed=True) == "served"
