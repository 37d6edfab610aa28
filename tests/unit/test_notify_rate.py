"""The notification rate limiter (per kind, per window, one summary) and the event
classifier (transitions only), with an injected clock."""

from __future__ import annotations

import pytest

from console.gateway.notifications import EventClassifier
from console.notify_rate import KindRateLimiter, Summary
from console.terminal_text import osc_safe


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_flood_of_300_is_three_messages_and_one_summary() -> None:
    clock = Clock()
    limiter = KindRateLimiter(limit=3, window_s=60, clock=clock)
    admitted = sum(limiter.admit("lost") for _ in range(300))
    assert admitted == 3
    assert limiter.summaries() == []  # the window is still open
    clock.now += 60
    assert limiter.summaries() == [Summary("lost", 297, 60)]
    assert limiter.summaries() == []  # reported once
    assert Summary("lost", 297, 60).message == "and 297 more runs turned lost in the last 60 s"


def test_kinds_are_limited_separately() -> None:
    limiter = KindRateLimiter(limit=1, window_s=60, clock=Clock())
    assert [limiter.admit(k) for k in ("lost", "lost", "interrupt", "late", "interrupt")] == [
        True, False, True, True, False]


def test_a_window_without_excess_ends_quietly_and_a_new_one_opens() -> None:
    clock = Clock()
    limiter = KindRateLimiter(limit=2, window_s=10, clock=clock)
    assert limiter.admit("late") and limiter.admit("late")
    clock.now += 10
    assert limiter.summaries() == []
    assert limiter.admit("late") and limiter.admit("late") and not limiter.admit("late")
    clock.now += 9.9
    assert limiter.summaries() == []
    clock.now += 0.1
    assert limiter.summaries() == [Summary("late", 1, 10)]


def test_an_event_after_the_window_before_its_summary_joins_that_summary() -> None:
    clock = Clock()
    limiter = KindRateLimiter(limit=1, window_s=5, clock=clock)
    assert limiter.admit("leak") and not limiter.admit("leak")
    clock.now += 6
    assert not limiter.admit("leak")  # the summary is due first
    assert limiter.summaries() == [Summary("leak", 2, 5)]
    assert limiter.admit("leak")  # a fresh window


def test_invalid_limits_are_refused() -> None:
    with pytest.raises(ValueError):
        KindRateLimiter(limit=0)
    with pytest.raises(ValueError):
        KindRateLimiter(window_s=0)


def run(run_id: str, state: str) -> dict[str, object]:
    return {"kind": "run", "data": {"id": run_id, "state": state, "name": "job"}}


def test_runs_notify_on_the_transition_only() -> None:
    c = EventClassifier()
    assert c.classify(run("r1", "running")) is None
    note = c.classify(run("r1", "late"))
    assert note is not None and (note.kind, note.run_id) == ("late", "r1")
    assert c.classify(run("r1", "late")) is None  # still late: no second message
    lost = c.classify(run("r1", "lost"))
    assert lost is not None and lost.kind == "lost"
    assert c.classify(run("r1", "running")) is None
    again = c.classify(run("r1", "lost"))
    assert again is not None and again.kind == "lost"  # lost again after a recovery


def test_interrupts_notify_once_when_pending_and_seeded_ones_not_at_all() -> None:
    c = EventClassifier()
    c.seed({"r0": "lost"}, ["r0#old"])
    assert c.classify(run("r0", "lost")) is None
    assert c.classify({"kind": "interrupt", "data": {"id": "r0#old", "status": "pending"}}) is None
    event = {"kind": "interrupt", "data": {"id": "r1#i", "run_id": "r1", "title": "ok?",
                                           "status": "pending"}}
    note = c.classify(event)
    assert note is not None and note.kind == "interrupt" and note.run_id == "r1"
    assert c.classify(event) is None
    decided = {"kind": "interrupt", "data": {"id": "r2#i", "status": "decided"}}
    assert c.classify(decided) is None


def test_leak_notices_and_overdue_obligations() -> None:
    c = EventClassifier()
    leak = c.classify({"kind": "notice", "data": {
        "level": "warning", "run_id": "r1", "message": "r1: suspected leak of gpu-0"}})
    assert leak is not None and leak.kind == "leak"
    assert c.classify({"kind": "notice", "data": {"level": "info", "message": "fine"}}) is None
    ob = {"kind": "obligation", "data": {"id": "o1", "run_id": "r1", "state": "overdue",
                                         "what": "w", "rule": "x"}}
    first = c.classify(ob)
    assert first is not None and first.kind == "obligation"
    assert c.classify(ob) is None
    assert c.classify({"kind": "obligation", "data": {"id": "o2", "state": "open"}}) is None


def test_slack_text_cannot_mention_or_link() -> None:
    c = EventClassifier()
    note = c.classify(run("r1", "lost") | {"data": {"id": "r1", "state": "lost",
                                                    "name": "<!channel> <http://x|y> & co"}})
    assert note is not None
    text = note.slack_body("ws://gw")["text"]
    assert "<" not in text and ">" not in text and "&lt;!channel&gt;" in text
    assert "&amp; co" in text


def test_osc_text_has_no_controls_and_no_field_separator() -> None:
    text = osc_safe("a\x1b]52;c;AAAA\x07b\x9b2J;c" + "x" * 300)
    assert not any(ord(ch) < 0x20 or 0x7f <= ord(ch) <= 0x9f for ch in text)
    assert ";" not in text and len(text) == 200 and text.endswith("...")
