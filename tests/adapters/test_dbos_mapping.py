"""Pure mapping of DBOS rows to irq's model (no DBOS process needed)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from backend_adapters.base import Unreachable
from backend_adapters.dbos.location import locate
from backend_adapters.dbos.mapping import (
    interrupt_from_payload,
    journal_from_steps,
    paused_by_irq,
    run_from_status,
    state_of,
)
from console.model import DecisionKind, RunState


def row(fid: int, name: str, output: object = None, error: object = None) -> dict:
    return {
        "function_id": fid,
        "function_name": name,
        "output": output,
        "error": error,
        "child_workflow_id": None,
        "started_at_epoch_ms": 1_800_000_000_000 + fid,
        "completed_at_epoch_ms": 1_800_000_000_500 + fid,
    }


@pytest.mark.parametrize(
    ("native", "paused", "intent", "expected"),
    [
        ("PENDING", False, None, RunState.RUNNING),
        ("ENQUEUED", False, None, RunState.RUNNING),
        ("DELAYED", False, None, RunState.RUNNING),
        ("PENDING", False, "cancel", RunState.CANCELLING),
        ("SUCCESS", False, None, RunState.COMPLETED),
        ("ERROR", False, None, RunState.FAILED),
        ("MAX_RECOVERY_ATTEMPTS_EXCEEDED", False, None, RunState.GIVEN_UP),
        ("CANCELLED", True, "pause", RunState.PAUSED),
        ("CANCELLED", False, None, RunState.CANCELLED),
    ],
)
def test_dbos_status_maps_to_unified_state(native, paused, intent, expected):
    assert state_of(native, paused=paused, intent=intent) is expected


def test_recv_polls_collapse_and_irq_bookkeeping_is_hidden():
    steps = [
        row(1, "fetch"),
        row(2, "DBOS.setEvent"),
        row(3, "DBOS.recv"),
        row(4, "DBOS.sleep", 1.0),
        row(5, "DBOS.recv", {"type": "approve", "by": "alice"}),
        row(6, "DBOS.sleep", 2.0),
        row(7, "DBOS.setEvent"),
        row(8, "deploy", error=RuntimeError("boom")),
    ]
    journal = journal_from_steps(steps, native="ERROR", marker=None)
    assert [(s.index, s.name, s.status) for s in journal] == [
        (1, "fetch", "completed"),
        (3, "wait for decision", "completed"),
        (8, "deploy", "failed"),
    ]
    assert journal[1].detail == "2 poll(s); received approve by alice"
    assert "boom" in journal[2].detail


def test_a_recv_still_waiting_shows_as_wait_in_flight():
    # while the first poll waits, only its sleep (journaled at its start) is there
    first = journal_from_steps(
        [row(1, "fetch"), row(2, "DBOS.setEvent"), row(4, "DBOS.sleep", 9.0)],
        native="PENDING",
        marker={"name": "fetch", "function_id": 1, "ended_at_ms": 1},
    )
    assert [(s.name, s.status) for s in first] == [
        ("fetch", "completed"),
        ("wait for decision", "in_flight"),
    ]
    later = journal_from_steps(
        [row(1, "fetch"), row(2, "DBOS.setEvent"), row(3, "DBOS.recv"), row(4, "DBOS.sleep")]
        + [row(6, "DBOS.sleep")],
        native="PENDING",
        marker=None,
    )
    assert [(s.name, s.status) for s in later] == [
        ("fetch", "completed"),
        ("wait for decision", "in_flight"),
    ]
    assert "waiting for a decision" in later[-1].detail


def test_marker_of_an_unjournaled_step_is_the_step_in_flight():
    marker = {"name": "train", "function_id": 3, "started_at_ms": 1_800_000_000_000}
    steps = [row(1, "fetch"), row(2, "plan")]
    running = journal_from_steps(steps, native="PENDING", marker=marker)
    assert (running[-1].name, running[-1].status) == ("train", "in_flight")
    paused = journal_from_steps(steps, native="CANCELLED", marker=marker, paused=True)
    assert "runs again on resume" in paused[-1].detail
    cancelled = journal_from_steps(steps, native="CANCELLED", marker=marker, paused=False)
    assert "discarded" in cancelled[-1].detail
    done = journal_from_steps([*steps, row(3, "train")], native="PENDING", marker=marker)
    assert [s.status for s in done] == ["completed"] * 3
    finished = journal_from_steps(steps, native="SUCCESS", marker=marker)
    assert [s.name for s in finished] == ["fetch", "plan"]


def test_interrupt_payload_maps_to_interrupt_and_malformed_is_none():
    payload = {
        "interrupt_id": "wf/1",
        "title": "Send it?",
        "action": "send_email",
        "args": {"to": ["a@b.c"]},
        "args_schema": {"type": "object"},
        "allowed_decisions": ["edit", "approve", "bogus"],
        "created_at": "2026-11-29T10:00:00+00:00",
    }
    interrupt = interrupt_from_payload(payload, run_id="dbos:local/wf")
    assert interrupt is not None
    assert interrupt.id == "dbos:local/wf#wf/1" and interrupt.native_id == "wf/1"
    assert interrupt.allowed_decisions == [DecisionKind.EDIT, DecisionKind.APPROVE]
    assert interrupt.created_at.isoformat() == "2026-11-29T10:00:00+00:00"
    assert interrupt_from_payload(None, run_id="r") is None
    assert interrupt_from_payload({"title": "no id"}, run_id="r") is None
    assert interrupt_from_payload("text", run_id="r") is None


def test_run_uses_agent_report_over_declaration_and_flags_recovery():
    status = SimpleNamespace(
        workflow_id="wf",
        status="PENDING",
        name="irq_demo_agent",
        recovery_attempts=1,
        created_at=1_700_000_000_000,
        updated_at=1_700_000_001_000,
        executor_id="w1",
        app_version="v1",
        queue_name=None,
        attributes={
            "irq.run": {
                "name": "billing",
                "interval_s": 2,
                "timeout_s": 10,
                "resources": [{"id": "gpu", "kind": "gpu", "on_pause": "keep"}],
            },
            "irq.report": {
                "phase": "running",
                "execution": 2,
                "recoveries": 1,
                "resources": [{"id": "gpu", "kind": "gpu", "state": "held"}],
            },
            "irq.step": {"name": "train", "function_id": 4, "ended_at_ms": None},
        },
    )
    run = run_from_status(status, context="local", paused=False)
    assert run.name == "billing" and run.state is RunState.RUNNING
    assert run.heartbeat_interval_s == 2 and run.heartbeat_timeout_s == 10
    assert run.preempted is True and run.attempt == 1 and run.in_flight_step == "train"
    assert [(r.id, r.state) for r in run.resources] == [("gpu", "held")]
    bare = SimpleNamespace(**{**vars(status), "attributes": None})
    plain = run_from_status(bare, context="local", paused=False)
    assert plain.resources == [] and plain.warnings and plain.preempted is False


def test_sqlite_urls_in_both_slash_styles_name_the_same_file(tmp_path: Path):
    db = tmp_path / "sys.db"
    db.write_bytes(b"")
    for raw in (f"dbos+sqlite:///{db}", f"dbos+sqlite:///{str(db).lstrip('/')}"):
        loc = locate(raw, "ignored", {})
        assert loc.sqlite_path == db and loc.url == f"sqlite:///{db}"
    pg = locate(
        "dbos+postgresql://u:pw@db:5432/sys?sslmode=require&lookback_s=5",
        "postgresql://u:pw@db:5432/sys",
        {"sslmode": "require", "lookback_s": "5"},
    )
    assert pg.url == "postgresql://u:pw@db:5432/sys?sslmode=require"
    assert pg.display == "postgresql://db:5432/sys"
    with pytest.raises(Unreachable):
        locate("dbos+mysql://x/y", "mysql://x/y", {})


def test_application_version_derived_from_the_code_is_not_pinned():
    """dbos 3.4.0 without ``application_version`` uses the MD5 of the workflow sources (seen
    on a real SQLite database: '243a69f0321aff8d5f32d4504992cc29')."""
    from backend_adapters.dbos.mapping import version_pinned

    assert version_pinned("243a69f0321aff8d5f32d4504992cc29") is False
    assert version_pinned("DEFAULT_VERSION-billing") is False
    assert version_pinned("billing-7") is True  # what irq's agent_config pins
    assert version_pinned("") is None and version_pinned(None) is None
    status = SimpleNamespace(
        workflow_id="wf-v", status="PENDING", name="wf", attributes={},
        app_version="243a69f0321aff8d5f32d4504992cc29", recovery_attempts=1,
    )
    run = run_from_status(status, context="local", paused=False)
    assert run.app_version == "243a69f0321aff8d5f32d4504992cc29"
    assert run.version_pinned is False and run.heartbeat_expected
    # resume's plan names the version the run is bound to (dbos.md §4)
    from console.model import Action

    assert "application version 243a69f0321aff8d5f32d4504992cc29" in (
        run.action_notes[Action.RESUME][0]
    )
    queued = run_from_status(SimpleNamespace(**{**vars(status), "status": "ENQUEUED"}),
                             context="local", paused=False)
    assert queued.heartbeat_expected is False


def test_a_resume_intent_dated_after_the_cancel_is_a_resume_in_progress():
    """Any gateway, whatever its pause ledger, reads a CANCELLED row with intent resume as
    still paused while the intent is dated after the cancel (resume_workflow not applied);
    a cancel after the resume (completed_at set again, on SQLite to the second) is a cancel."""
    paused_at = 1_764_900_000_000  # the pause's cancel_workflow set completed_at

    def row(intent_at_ms: int | None, completed_at: int | None) -> SimpleNamespace:
        intent = {"action": "resume", "by": "alice", "reason": "go"}
        if intent_at_ms is not None:
            intent["at"] = datetime.fromtimestamp(intent_at_ms / 1000, UTC).isoformat()
        return SimpleNamespace(
            status="CANCELLED", completed_at=completed_at, attributes={"irq.intent": intent}
        )

    assert paused_by_irq(row(paused_at + 30_000, paused_at), ledger_paused=False)
    # the resume applied, then a direct cancel in the same second (SQLite truncates)
    assert not paused_by_irq(row(paused_at + 30_400, paused_at + 30_000), ledger_paused=False)
    assert not paused_by_irq(row(paused_at + 30_000, paused_at + 31_000), ledger_paused=False)
    # nothing to compare: the ledger decides
    assert not paused_by_irq(row(None, paused_at), ledger_paused=False)
    assert not paused_by_irq(row(paused_at + 30_000, None), ledger_paused=False)
    assert paused_by_irq(row(paused_at + 30_000, paused_at + 31_000), ledger_paused=True)
    assert not paused_by_irq(
        SimpleNamespace(**{**vars(row(paused_at + 30_000, paused_at)), "status": "ENQUEUED"}),
        ledger_paused=True,
    )
