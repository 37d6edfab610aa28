"""A console whose beats the gateway sheds (it fell behind: PROTOCOL.md, ``shed``) judges
its runs' heartbeat ages as of when the shedding began: the beats it holds are older than
the gateway's, and a run that really fell silent comes as a state change. Once the markers
stop, ages are judged at the present again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import console.client as client_module
from console.client import SHED_RECENT_S, FleetView
from console.model import Run, RunState

T0 = datetime(2026, 12, 4, 11, 0, tzinfo=UTC)


def test_ages_are_judged_as_of_when_the_shedding_began(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [T0]
    monkeypatch.setattr(client_module, "utcnow", lambda: now[0])
    view = FleetView()
    run = Run(id="dbos:local/wf", backend="dbos", context="local", native_id="wf",
              heartbeat_at=T0 - timedelta(seconds=2), heartbeat_interval_s=5.0)
    view.apply({"seq": 1, "kind": "run", "data": run.contract(T0)})
    assert view.liveness_now(T0) == T0
    view.apply({"seq": 9, "kind": "shed", "data": {"from": 2, "beats": 8}})
    for step in range(1, 9):  # a marker with each frame, for 8 s
        now[0] = T0 + timedelta(seconds=step)
        view.apply({"seq": 10 + step, "kind": "shed", "data": {"from": 10 + step, "beats": 1}})
    later = T0 + timedelta(seconds=8.5)
    held = view.runs[run.id]
    assert held.suspected_state(later) is RunState.LATE  # 10.5 s without a beat here
    assert view.liveness_now(later) == T0  # ... but the gateway has had its beats
    assert held.suspected_state(view.liveness_now(later)) is None
    gone = later + timedelta(seconds=SHED_RECENT_S)  # no marker since: current again
    assert view.liveness_now(gone) == gone


def test_the_header_says_the_beats_are_shed_and_for_how_long() -> None:
    from console.tui.widgets.status_header import HeaderInfo, header_text

    plain = header_text(HeaderInfo(connection="live", lag_ms=12), 100).plain
    shed = header_text(HeaderInfo(connection="live", lag_ms=12, shed_s=4.0), 100).plain
    assert "beats shed" not in plain
    assert "beats shed 4" in shed
