"""An agent's own interrupt deadline (``deadline=`` on every helper): the payload it
publishes carries ``deadline_at`` = creation + deadline, and every adapter's payload ->
Interrupt mapping reads it back (a malformed one is ignored, the interrupt is kept; beside
a policy rule's deadline the earliest wins)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from backend_adapters.dbos.mapping import interrupt_from_payload
from backend_adapters.interrupt_deadline import deadline_at_iso, deadline_at_of
from backend_adapters.langgraph.agent import inbox_request
from backend_adapters.langgraph.interrupt_shapes import interrupt_from_value
from backend_adapters.restate.state_mapping import interrupt_of
from backend_adapters.run_records import interrupt_payload
from backend_adapters.temporal.state_mapping import interrupts_from_shape
from console.model import Interrupt

CREATED = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _payload(deadline: timedelta | float | None, **extra: Any) -> dict[str, Any]:
    payload = dict(interrupt_payload(
        "wf-1/1", "Refund order 42?", description="", action="refund", args={"order": 42},
        args_schema=None, allowed_decisions=["approve", "reject"], created_at=CREATED,
        deadline=deadline))
    return {"awakeable_id": "sign_1abc", **payload, **extra}


def _mapped(payload: dict[str, Any]) -> list[Interrupt]:
    """The payload through the DBOS, Temporal, Restate and LangGraph (Agent Inbox) mappings."""
    dbos = interrupt_from_payload(payload, run_id="dbos:x/wf-1")
    assert dbos is not None
    (temporal,) = interrupts_from_shape("temporal:x/wf-1", [payload], fallback_created_at=CREATED)
    restate = interrupt_of(payload, run_id="restate:x/inv-1")  # type: ignore[arg-type]
    inbox = inbox_request("refund", {"order": 42}, allowed=("approve", "reject"))
    for key in ("deadline_at", "policy"):
        if key in payload:
            inbox[key] = payload[key]
    langgraph = interrupt_from_value([inbox], run_id="langgraph:x/t", native_id="i1",
                                     created_at=CREATED)
    return [dbos, temporal, restate, langgraph]


@pytest.mark.parametrize("deadline", [timedelta(minutes=30), 1800, 1800.0])
def test_the_helper_payload_carries_deadline_at_counted_from_its_creation(
        deadline: timedelta | float) -> None:
    payload = _payload(deadline)
    assert payload["deadline_at"] == "2026-12-01T12:30:00+00:00"
    assert payload["created_at"] == CREATED.isoformat()
    assert "deadline_at" not in _payload(None)


def test_every_adapter_reads_the_agents_deadline_at() -> None:
    for intr in _mapped(_payload(timedelta(seconds=90))):
        assert intr.deadline_at == CREATED + timedelta(seconds=90), intr.id
        assert intr.contract()["deadline_at"] == "2026-12-01T12:01:30+00:00"


@pytest.mark.parametrize("bad", ["next friday", 1_800, "", {"at": "soon"}, None])
def test_a_malformed_deadline_at_is_ignored_and_never_hides_the_interrupt(bad: Any) -> None:
    for intr in _mapped(_payload(None, deadline_at=bad)):
        assert intr.deadline_at is None and intr.title, intr.id


def test_beside_a_policy_rules_deadline_the_earliest_wins() -> None:
    rule = {"rule": "refund-large", "deadline_s": 600}
    for intr in _mapped(_payload(60, policy=rule)):  # the agent's is sooner
        assert intr.deadline_at == CREATED + timedelta(seconds=60), intr.id
    for intr in _mapped(_payload(3600, policy=rule)):  # the rule's is sooner
        assert intr.deadline_at == CREATED + timedelta(seconds=600), intr.id


def test_the_langgraph_inbox_request_counts_its_deadline_from_now() -> None:
    before = datetime.now(UTC)
    request = inbox_request("refund", {"order": 42}, deadline=timedelta(hours=1))
    at = deadline_at_of(request["deadline_at"])
    assert at is not None and before + timedelta(hours=1) <= at
    assert at <= datetime.now(UTC) + timedelta(hours=1)
    assert "deadline_at" not in inbox_request("refund", {"order": 42})


def test_a_deadline_at_is_utc_and_a_naive_one_reads_as_utc() -> None:
    local = datetime(2026, 12, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    assert deadline_at_iso(local, 60) == "2026-12-01T12:01:00+00:00"
    assert deadline_at_of("2026-12-01T12:01:00") == CREATED + timedelta(minutes=1)


@pytest.mark.parametrize("bad", [-1, timedelta(seconds=-5), float("inf"), float("nan"), "1h",
                                 True])
def test_a_bad_deadline_is_refused_where_the_interrupt_is_raised(bad: Any) -> None:
    with pytest.raises(ValueError, match="deadline"):
        deadline_at_iso(CREATED, bad)
    with pytest.raises(ValueError, match="deadline"):
        inbox_request("refund", {"order": 42}, deadline=bad)
