"""Pure parts of the Temporal adapter: URL config, payloads, state mapping, budget, liveness.

Inputs are shapes recorded from Temporal Server 1.32.0 (see docs/backends/temporal.md).
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest

from backend_adapters.base import InvalidInput
from backend_adapters.decision_refusal import refuse_decision
from backend_adapters.registry import BackendURLError, parse_backend_url
from backend_adapters.temporal.config import TemporalConfig
from backend_adapters.temporal.history_journal import journal_from_history
from backend_adapters.temporal.payloads import (
    decode_payload,
    decode_payloads,
    parse_duration,
    parse_time,
    search_attribute,
)
from backend_adapters.temporal.request_budget import RefreshPlanner, TokenBucket
from backend_adapters.temporal.state_mapping import (
    RunEvidence,
    activity_from_json,
    heartbeat_loss_from_history,
    run_from_evidence,
    worker_version,
)
from backend_adapters.temporal.worker_liveness import stale_workers, workers_from_json
from console.model import Action, Decision, DecisionKind, Interrupt, RunState
from console.semantics import recoverability_warnings

NOW = datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC)


def b64(value: object) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


def iso(dt: datetime) -> str:
    return dt.isoformat().replace("+00:00", "Z")


def activity(**over: object) -> dict:
    base = {
        "activityId": "1",
        "activityType": {"name": "train"},
        "state": "PENDING_ACTIVITY_STATE_STARTED",
        "heartbeatDetails": [
            {
                "irq": 1,
                "cadence_s": 1.0,
                "progress": {"step": 5, "total": 10},
                "resources": [
                    {"id": "gpu:0", "kind": "gpu", "on_pause": "keep", "state": "held"},
                    {"id": "lock:x", "kind": "lock", "on_pause": "release", "state": "held"},
                ],
            }
        ],
        "lastHeartbeatTime": iso(NOW - timedelta(seconds=0.5)),
        "lastStartedTime": iso(NOW - timedelta(seconds=30)),
        "attempt": 1,
        "lastWorkerIdentity": "w1",
        "activityOptions": {"heartbeatTimeout": "5s", "startToCloseTimeout": "3600s"},
    }
    base.update(over)
    return base


def run_for(*acts: dict, status: str = "WORKFLOW_EXECUTION_STATUS_RUNNING", **ev: object):
    info = {
        "execution": {"workflowId": "agent-1", "runId": "r1"},
        "type": {"name": "Agent"},
        "status": status,
        "startTime": iso(NOW - timedelta(minutes=1)),
    }
    evidence = RunEvidence(
        workflow_id="agent-1",
        info=info,
        activities=[activity_from_json(a) for a in acts],
        observed_at=NOW,
        **ev,  # type: ignore[arg-type]
    )
    return run_from_evidence(evidence, context="prod", now=NOW)


# ------------------------------------------------------------------------------ config


def test_config_from_url() -> None:
    cfg = TemporalConfig.from_url(
        parse_backend_url(
            "temporal+https://:sekret@temporal.example:7243/agents?context=prod&rps=50"
            "&query=TaskQueue='gpu'&poll=1.5&timeout=2"
        )
    )
    assert cfg.base_url == "https://temporal.example:7243"
    assert cfg.namespace == "agents" and cfg.context == "prod"
    assert cfg.api_key == "sekret" and "sekret" not in cfg.display_url
    assert cfg.rps == 50 and cfg.poll_interval_s == 1.5 and cfg.timeout_s == 2
    assert cfg.visibility_filter == "TaskQueue='gpu'"
    plain = TemporalConfig.from_url(parse_backend_url("temporal+http://127.0.0.1:7243"))
    assert plain.namespace == "default" and plain.verify is True and plain.api_key is None
    with pytest.raises(BackendURLError, match="unknown parameter"):
        TemporalConfig.from_url(parse_backend_url("temporal+http://h:1/ns?rsp=3"))
    with pytest.raises(BackendURLError, match="rps"):
        TemporalConfig.from_url(parse_backend_url("temporal+http://h:1/ns?rps=fast"))


# ------------------------------------------------------------------------------ payloads


def test_payload_forms() -> None:
    full = {
        "metadata": {"encoding": base64.b64encode(b"json/plain").decode(), "type": "x"},
        "data": b64(["deploy"]),
    }
    assert decode_payload(full) == ["deploy"]
    assert decode_payload({"a": 1}) == {"a": 1}  # shorthand stays as is
    null = {"metadata": {"encoding": base64.b64encode(b"binary/null").decode()}}
    assert decode_payloads([null, {"x": 1}]) == [None, {"x": 1}]
    binary = {"metadata": {"encoding": base64.b64encode(b"binary/encrypted").decode()}, "data": ""}
    assert decode_payloads({"payloads": [binary]}) == [None]
    info = {"searchAttributes": {"indexedFields": {"IrqPendingInterrupts": full}}}
    assert search_attribute(info, "IrqPendingInterrupts") == ["deploy"]
    assert search_attribute(info, "Missing") is None
    assert parse_time("2026-11-29T10:06:58.845699242Z") == datetime(
        2026, 11, 29, 10, 6, 58, 845699, tzinfo=UTC
    )
    assert parse_time("0001-01-01T00:00:00Z") is None
    assert parse_duration("5s") == 5.0 and parse_duration("0s") is None


# ------------------------------------------------------------------------------ states


def test_running_activity_maps_heartbeat_and_resources() -> None:
    run = run_for(activity())
    assert run.id == "temporal:prod/agent-1" and run.state is RunState.RUNNING
    assert run.heartbeat_timeout_s == 5.0 and run.heartbeat_interval_s == 1.0
    assert run.progress == 0.5 and run.attempt == 1
    assert [r.id for r in run.resources] == ["gpu:0", "lock:x"]
    assert run.native_state == "running/started"


@pytest.mark.parametrize(
    ("over", "state"),
    [
        ({"lastHeartbeatTime": iso(NOW - timedelta(seconds=2.5))}, RunState.LATE),
        ({"lastHeartbeatTime": iso(NOW - timedelta(seconds=9))}, RunState.LATE),  # not recorded
        ({"state": "PENDING_ACTIVITY_STATE_PAUSED", "paused": True}, RunState.PAUSED),
        ({"state": "PENDING_ACTIVITY_STATE_PAUSE_REQUESTED", "paused": True}, RunState.PAUSING),
        ({"state": "PENDING_ACTIVITY_STATE_CANCEL_REQUESTED"}, RunState.CANCELLING),
        (
            {
                "state": "PENDING_ACTIVITY_STATE_SCHEDULED",
                "attempt": 2,
                "lastFailure": {
                    "message": "activity Heartbeat timeout",
                    "timeoutFailureInfo": {"timeoutType": "TIMEOUT_TYPE_HEARTBEAT"},
                },
            },
            RunState.LOST,
        ),
        (
            {
                "state": "PENDING_ACTIVITY_STATE_SCHEDULED",
                "attempt": 3,
                "lastFailure": {"message": "boom", "applicationFailureInfo": {"type": "X"}},
                "nextAttemptScheduleTime": iso(NOW + timedelta(seconds=4)),
            },
            RunState.BACKING_OFF,
        ),
    ],
)
def test_activity_states(over: dict, state: RunState) -> None:
    assert run_for(activity(**over)).state is state


def test_worst_activity_wins_and_interrupts_wait() -> None:
    paused = activity(activityId="2", state="PENDING_ACTIVITY_STATE_PAUSED", paused=True)
    assert run_for(activity(), paused).state is RunState.PAUSED
    waiting = run_for(interrupt_ids=["deploy"])
    assert waiting.state is RunState.WAITING
    assert waiting.interrupts == ["temporal:prod/agent-1#deploy"]
    assert run_for(interrupt_ids=["x"], cancel_requested=True).state is RunState.CANCELLING


def test_facts_for_warnings_no_heartbeat_timeout_and_attempt() -> None:
    """The primary activity's facts go to typed fields (the hub words them for every
    backend); Temporal's own advice goes to typed action notes."""
    bare = activity(activityOptions={"startToCloseTimeout": "600s"}, attempt=3)
    run = run_for(bare)
    assert run.heartbeat_timeout_s is None and run.heartbeat_expected
    assert run.step_timeout_s == 600 and run.attempt == 3
    words = recoverability_warnings(run)
    assert any("no heartbeat timeout" in w and "600s" in w for w in words)
    assert any("on attempt 3" in w for w in words)
    assert any("attempt 3" in n and "reset" in n for n in run.action_notes[Action.CANCEL])
    assert any("no heartbeat timeout" in n for n in run.action_notes[Action.PAUSE])
    assert "action_notes" not in run.details
    # a second activity is named by the adapter itself
    other = activity(activityId="2", activityOptions={"startToCloseTimeout": "60s"})
    two = run_for(activity(), other)
    assert any("activity 'train' (2) has no heartbeat timeout" in w for w in two.warnings)
    # a workflow with no activity pending has nothing that could heartbeat
    assert run_for(interrupt_ids=["deploy"]).heartbeat_expected is False


def test_heartbeat_warnings_say_what_is_missing() -> None:
    """hello_cancellation heartbeats without details: it has heartbeated, it reports no
    resources. Only an activity with no recorded heartbeat "has not heartbeated yet"."""
    plain = activity(heartbeatDetails=None)
    warnings = run_for(plain).warnings
    assert not any("has not heartbeated" in w for w in warnings)
    assert any("heartbeats without irq details" in w for w in warnings)
    fresh = activity(heartbeatDetails=None, lastHeartbeatTime=None)
    assert any("has not heartbeated yet" in w for w in run_for(fresh).warnings)
    assert not any("heartbeat" in w for w in run_for(activity()).warnings)


def test_worker_version_facts() -> None:
    # observed on 1.32.0 with an unversioned temporalio 1.35 worker (describe)
    assert worker_version(
        {"mostRecentWorkerVersionStamp": {"buildId": "42a2a470"}, "autoResetPoints": {}}
    ) == ("42a2a470", False)
    pinned = {"versioningInfo": {"behavior": "VERSIONING_BEHAVIOR_PINNED",
                                 "deploymentVersion": {"deploymentName": "agents",
                                                       "buildId": "v7"}}}
    assert worker_version(pinned) == ("agents:v7", True)
    upgrade = {"versioningInfo": {"behavior": "VERSIONING_BEHAVIOR_AUTO_UPGRADE",
                                  "deploymentVersion": {"deploymentName": "a", "buildId": "v7"}}}
    assert worker_version(upgrade) == ("a:v7", False)
    assert worker_version({}) == (None, None)  # a list entry: not described yet


def test_closed_runs_resources() -> None:
    manifest = run_for(activity()).resources
    terminated = run_for(status="WORKFLOW_EXECUTION_STATUS_TERMINATED", last_manifest=manifest)
    assert terminated.state is RunState.TERMINATED
    assert {r.state for r in terminated.resources} == {"suspected_leak"}
    report = {"event": "cancelled", "kept": None, "released": ["gpu:0", "lock:x"]}
    cancelled = run_for(
        status="WORKFLOW_EXECUTION_STATUS_CANCELED", last_manifest=manifest, report=report
    )
    assert {r.state for r in cancelled.resources} == {"released"}


def test_heartbeat_loss_from_history() -> None:
    timed_out = {
        "eventId": "7",
        "eventType": "EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT",
        "eventTime": iso(NOW),
        "activityTaskTimedOutEventAttributes": {
            "failure": {
                "timeoutFailureInfo": {
                    "timeoutType": "TIMEOUT_TYPE_HEARTBEAT",
                    "lastHeartbeatDetails": [{"irq": 1, "resources": [{"id": "gpu:0"}]}],
                }
            },
            "retryState": "RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED",
        },
    }
    task = {"eventId": "8", "eventType": "EVENT_TYPE_WORKFLOW_TASK_SCHEDULED"}
    lost = heartbeat_loss_from_history([task, timed_out])
    assert lost is not None and lost["retry_state"] == "maximum_attempts_reached"
    run = run_for(heartbeat_lost=lost)
    assert run.state is RunState.LOST and [r.id for r in run.resources] == ["gpu:0"]
    completed = {"eventId": "9", "eventType": "EVENT_TYPE_ACTIVITY_TASK_COMPLETED"}
    assert heartbeat_loss_from_history([completed, timed_out]) is None


def test_journal_from_history() -> None:
    events = [
        {
            "eventId": "5",
            "eventType": "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED",
            "eventTime": iso(NOW),
            "activityTaskScheduledEventAttributes": {
                "activityId": "1",
                "activityType": {"name": "fetch"},
            },
        },
        {
            "eventId": "7",
            "eventType": "EVENT_TYPE_ACTIVITY_TASK_COMPLETED",
            "activityTaskCompletedEventAttributes": {"scheduledEventId": "5"},
        },
        {
            "eventId": "9",
            "eventType": "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED",
            "activityTaskScheduledEventAttributes": {
                "activityId": "2",
                "activityType": {"name": "train"},
            },
        },
    ]
    steps = journal_from_history(events)
    assert [(s.name, s.status) for s in steps] == [
        ("fetch (activity 1)", "completed"),
        ("train (activity 2)", "in_flight"),
    ]


# ------------------------------------------------------------------------------ decisions


def test_check_decision() -> None:
    interrupt = Interrupt(
        id="temporal:p/a#i1",
        run_id="temporal:p/a",
        native_id="i1",
        title="t",
        args_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
        allowed_decisions=[DecisionKind.APPROVE, DecisionKind.EDIT],
    )
    refuse_decision(interrupt, Decision(kind=DecisionKind.EDIT, args={"n": 3}), target=interrupt.id)
    with pytest.raises(InvalidInput, match="n"):
        refuse_decision(
            interrupt, Decision(kind=DecisionKind.EDIT, args={"n": "x"}), target=interrupt.id
        )
    with pytest.raises(InvalidInput, match="not allowed"):
        refuse_decision(
            interrupt, Decision(kind=DecisionKind.RESPOND, response="x"), target=interrupt.id
        )


# ------------------------------------------------------------------------------ budget


def test_token_bucket_and_planner_priorities() -> None:
    clock = [0.0]
    bucket = TokenBucket(10, burst=10, clock=lambda: clock[0])
    assert sum(bucket.try_take() for _ in range(20)) == 10
    clock[0] += 0.5
    assert sum(bucket.try_take() for _ in range(20)) == 5
    bucket.charge(3)
    assert bucket.available < 0

    planner = RefreshPlanner(near_deadline_s=2)
    planner.mark_described("old", at=1.0, deadline_at=NOW + timedelta(minutes=5), moving=False)
    planner.mark_described("fresh", at=9.0, deadline_at=NOW + timedelta(minutes=5), moving=False)
    planner.mark_described("due", at=8.0, deadline_at=NOW + timedelta(seconds=1), moving=False)
    planner.mark_described("late", at=9.5, deadline_at=None, moving=True)
    order = planner.order(
        ["fresh", "old", "due", "late", "new", "watched"], focus={"watched"}, dirty=set(), now=NOW
    )
    assert order == ["watched", "new", "due", "late", "old", "fresh"]

    # a crowd of heartbeating runs near their deadline never starves the quiet ones
    crowd = RefreshPlanner(near_deadline_s=2)
    for i in range(20):
        crowd.mark_described(f"hb{i}", at=5.0 + i, deadline_at=NOW, moving=False)
    crowd.mark_described("quiet", at=0.0, deadline_at=None, moving=False)
    picked = crowd.pick(
        [f"hb{i}" for i in range(20)] + ["quiet"], focus=set(), dirty=set(), now=NOW, budget=8
    )
    assert len(picked) == 8 and "quiet" in picked and picked[0] == "hb0"


# ------------------------------------------------------------------------------ workers


def test_stale_workers() -> None:
    data = {
        "workersInfo": [
            {
                "workerHeartbeat": {
                    "workerIdentity": "dead",
                    "status": "WORKER_STATUS_RUNNING",
                    "heartbeatTime": iso(NOW - timedelta(seconds=200)),
                }
            },
            {
                "workerHeartbeat": {
                    "workerIdentity": "alive",
                    "status": "WORKER_STATUS_RUNNING",
                    "heartbeatTime": iso(NOW - timedelta(seconds=59)),
                }
            },
        ]
    }
    assert stale_workers(workers_from_json(data), NOW) == {"dead": 200.0}
    run = run_for(activity(lastWorkerIdentity="dead"), stale_workers={"dead": 200.0})
    assert any("worker dead" in w for w in run.warnings)
