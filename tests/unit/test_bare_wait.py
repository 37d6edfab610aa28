"""A bare ``--wait`` (as in ``irq pause --filter 'backend:dbos has:gpu' --wait``) waits the
default time; a number after it is the time; words after ``--`` are never touched."""

from __future__ import annotations

from console.cli.wait import DEFAULT_WAIT_S, bare_wait

D = f"{DEFAULT_WAIT_S:g}"


def test_a_bare_wait_at_the_end_gets_the_default() -> None:
    assert bare_wait(["pause", "--filter", "has:gpu", "--wait"]) == [
        "pause", "--filter", "has:gpu", "--wait", D,
    ]  # fmt: skip


def test_a_bare_wait_before_an_option_or_an_id_gets_the_default() -> None:
    assert bare_wait(["pause", "--wait", "--yes"]) == ["pause", "--wait", D, "--yes"]
    assert bare_wait(["pause", "--wait", "dbos:local/r1"]) == ["pause", "--wait", D, "dbos:local/r1"]


def test_a_number_after_wait_is_kept() -> None:
    assert bare_wait(["cancel", "r1", "--wait", "12.5"]) == ["cancel", "r1", "--wait", "12.5"]
    assert bare_wait(["cancel", "--wait=3"]) == ["cancel", "--wait=3"]


def test_words_after_a_double_dash_are_left_alone() -> None:
    assert bare_wait(["approve", "--", "--wait"]) == ["approve", "--", "--wait"]
    assert bare_wait([]) == []
