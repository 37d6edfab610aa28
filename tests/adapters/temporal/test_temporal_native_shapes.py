"""Native waits from Temporal's answers (pure): handler definitions from the metadata query,
the wait site from the newest page of history, the inbox item."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from backend_adapters.temporal.native_wait_shapes import (
    HandlerDef,
    handler_schemas,
    handlers_from_metadata,
    short_duration,
    wait_interrupt,
    wait_site_from_history,
)
from console.model import DecisionKind, InterruptKind

T0 = "2026-12-04T04:34:21.000000000Z"


def metadata(**definition: Any) -> list[Any]:
    return [{"_protoMessageType": "temporal.api.sdk.v1.WorkflowMetadata",
             "definition": {"type": "W", **definition}}]


def event(eid: int, kind: str, **attrs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"eventId": str(eid), "eventType": f"EVENT_TYPE_{kind}", "eventTime": T0}
    if attrs:
        out["someEventAttributes"] = attrs
    return out


def test_metadata_gives_signals_and_updates_with_descriptions_and_skips_builtins() -> None:
    found = handlers_from_metadata(metadata(
        queryDefinitions=[{"name": "__stack_trace"}],
        signalDefinitions=[{"name": "send_approval", "description": "Approve it"},
                           {"name": "__temporal_internal"}],
        updateDefinitions=[{"name": "approve"}],
    ))
    assert found == (HandlerDef("send_approval", "signal", "Approve it"),
                     HandlerDef("approve", "update", ""))
    assert handlers_from_metadata(metadata(queryDefinitions=[{"name": "q"}])) == ()
    assert handlers_from_metadata([]) == ()


def test_a_workflow_using_irqs_helper_is_not_a_native_wait() -> None:
    assert handlers_from_metadata(metadata(updateDefinitions=[{"name": "irq_decide"}])) is None


def test_the_wait_begins_at_the_last_completed_workflow_task_and_its_timer_is_the_deadline() -> None:
    newest_first = [
        event(12, "TIMER_STARTED", startToFireTimeout="86400s", timerId="1"),
        event(11, "WORKFLOW_TASK_COMPLETED"),
        event(10, "WORKFLOW_TASK_STARTED"),
        event(9, "WORKFLOW_TASK_SCHEDULED"),
        event(8, "ACTIVITY_TASK_COMPLETED"),
    ]
    site = wait_site_from_history(newest_first, 12)
    assert site is not None
    assert site.native_id == "wait-11"
    assert site.text() == "after event #11 WorkflowTaskCompleted; timer #12 (24h) pending"
    assert site.began_at == datetime(2026, 12, 4, 4, 34, 21, tzinfo=UTC)
    assert site.deadline_at == site.began_at + timedelta(hours=24)


def test_no_wait_while_a_workflow_task_is_scheduled_or_a_signal_just_arrived() -> None:
    assert wait_site_from_history([event(13, "WORKFLOW_EXECUTION_SIGNALED"),
                                   event(12, "TIMER_STARTED"),
                                   event(11, "WORKFLOW_TASK_COMPLETED")], 13) is None
    assert wait_site_from_history([event(5, "WORKFLOW_TASK_SCHEDULED")], 5) is None
    assert wait_site_from_history([event(6, "ACTIVITY_TASK_SCHEDULED"),
                                   event(5, "WORKFLOW_TASK_COMPLETED")], 6) is None
    assert wait_site_from_history([], 0) is None


def test_a_cancelled_timer_is_no_deadline_and_a_completed_update_keeps_the_wait() -> None:
    newest_first = [
        event(16, "WORKFLOW_EXECUTION_UPDATE_COMPLETED"),
        event(15, "WORKFLOW_EXECUTION_UPDATE_ACCEPTED"),
        event(14, "TIMER_CANCELED", startedEventId="11"),
        event(13, "WORKFLOW_TASK_COMPLETED"),
        event(12, "WORKFLOW_TASK_STARTED"),
        event(11, "TIMER_STARTED", startToFireTimeout="600s"),
        event(10, "WORKFLOW_TASK_COMPLETED"),
    ]
    site = wait_site_from_history(newest_first, 16)
    assert site is not None and site.native_id == "wait-13"
    assert site.timers == () and site.deadline_at is None
    assert site.text() == "after event #13 WorkflowTaskCompleted"


def test_the_item_is_answered_by_respond_through_the_named_handlers() -> None:
    site = wait_site_from_history([event(12, "TIMER_STARTED", startToFireTimeout="90s"),
                                   event(11, "WORKFLOW_TASK_COMPLETED")], 12)
    assert site is not None
    schema = {"type": "object"}
    item = wait_interrupt(
        "temporal:local/wf-1", "Approval", site,
        [HandlerDef("send_approval", "signal", "Approve"), HandlerDef("approve", "update")],
        handler_schemas({"approve": schema, "bogus": 3}),
        fallback_created_at=datetime.now(UTC),
    )
    assert item.id == "temporal:local/wf-1#wait-11"
    assert item.kind is InterruptKind.UPDATE  # an update answers it
    assert item.allowed_decisions == [DecisionKind.RESPOND]
    assert [h.args_schema for h in item.handlers] == [None, schema]
    assert item.wait_site.endswith("timer #12 (1m30s) pending")
    assert item.title == "Approval waits for send_approval or approve"


def test_durations_read_like_an_operator_writes_them() -> None:
    assert [short_duration(s) for s in (0.5, 30, 90, 3600, 86400, 3661)] == [
        "0.5s", "30s", "1m30s", "1h", "24h", "1h1m1s"]
