"""The policy guard for Temporal workflows: tool calls checked against the gateway's policy.

A workflow must stay deterministic, so the decision is taken in a **local activity**
(``irq_policy_check``) whose result Temporal records in the history: a replay re-uses the
recorded decision even when the policy has changed since. The workflow then acts on it::

    with workflow.unsafe.imports_passed_through():
        from backend_adapters.temporal.agent import Interrupts
        from backend_adapters.temporal.policy_tools import guarded_tool

    @workflow.run
    async def run(self, req: dict) -> dict:
        try:
            return await guarded_tool(self.irq, "refund", {"amount": 250}, refund,
                                      agent="billing-agent", team="finance")
        except ToolProhibitedError as err:  # or ToolRejectedError (an operator said no)
            return {"refused": err.message}

- ``permit``: the tool activity runs;
- ``prohibit``: :class:`ToolProhibitedError` (a non-retryable ``ApplicationError``, so an
  uncaught one fails the workflow instead of retrying its task); the activity never runs;
- ``require_approval``: :meth:`Interrupts.ask` raises an interrupt carrying the rule
  (``policy``: rule, why, decide_role, approvers, policy_version); ``reject`` raises
  :class:`ToolRejectedError`, ``approve`` / ``edit`` run the activity once with the final
  arguments, ``respond`` returns the operator's response in place of the tool's result.

The decision event is sent to the gateway by the check activity; the obligations the
decision carries are opened after the call by the local activity ``irq_policy_record``.
Both use the call id ``t<n>`` (n = the workflow's tool-call counter), deterministic under
replay, so a resent event or obligation has the same id (the gateway is idempotent by id).
The ids of the opened obligations are in ``Interrupts.obligations``; the workflow fulfils one
with :func:`fulfil_obligation` (the local activity ``irq_policy_fulfil``).

Worker side: register :func:`policy_activities` on the ``Worker``; the worker process needs
``IRQ_AGENT_URL`` / ``IRQ_AGENT_TOKEN`` (an agent token whose scope covers
``temporal:<context>``) to receive the policy, and ``IRQ_TEMPORAL_CONTEXT`` when the
gateway names the Temporal context other than ``local``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

from backend_adapters.temporal.agent import Interrupts

with workflow.unsafe.imports_passed_through():
    from backend_adapters import policy_guard
    from console.policy.model import PolicyDecision

BACKEND = "temporal"
#: the irq context name of this Temporal server (``temporal:<context>``); else
#: ``IRQ_AGENT_CONTEXT``, else ``local`` (the adapter's default context name)
ENV_CONTEXT = "IRQ_TEMPORAL_CONTEXT"
ENV_AGENT_CONTEXT = "IRQ_AGENT_CONTEXT"
DEFAULT_CONTEXT = "local"

CHECK_ACTIVITY = "irq_policy_check"
RECORD_ACTIVITY = "irq_policy_record"
FULFIL_ACTIVITY = "irq_policy_fulfil"
ERROR_PROHIBITED = "IrqToolProhibited"
ERROR_REJECTED = "IrqToolRejected"

#: how long the first check of a worker process waits for the gateway's policy
POLICY_WAIT_S = 5.0
_LOCAL_TIMEOUT = timedelta(seconds=POLICY_WAIT_S + 25.0)
_LOCAL_RETRY = RetryPolicy(maximum_attempts=5, initial_interval=timedelta(seconds=0.5))


class ToolProhibitedError(ApplicationError):
    """The policy prohibits the tool call (the tool did not run). ``decision`` is the
    ``PolicyDecision`` as a dict (also the failure's first detail)."""

    def __init__(self, tool: str, decision: Mapping[str, Any]) -> None:
        winner = decision.get("winner") or "the policy default"
        super().__init__(
            f"{tool}: prohibited by {winner}",
            dict(decision),
            type=ERROR_PROHIBITED,
            non_retryable=True,
        )
        self.tool = tool
        self.decision = dict(decision)


class ToolRejectedError(ApplicationError):
    """An operator rejected the tool call the policy put to approval (the tool did not run)."""

    def __init__(self, tool: str, rule: str, feedback: str | None) -> None:
        super().__init__(
            f"{tool}: rejected under {rule}" + (f": {feedback}" if feedback else ""),
            {"rule": rule, "feedback": feedback},
            type=ERROR_REJECTED,
            non_retryable=True,
        )
        self.tool = tool
        self.rule = rule
        self.feedback = feedback


# ============================================================================ workflow side


async def guarded_tool(
    interrupts: Interrupts,
    tool: str,
    args: dict[str, Any],
    activity_fn: Callable[..., Any] | str,
    *,
    agent: str,
    team: str = "",
    data: Iterable[str] = (),
    sensitive: bool = False,
    args_schema: dict[str, Any] | None = None,
    title: str | None = None,
    start_to_close_timeout: timedelta = timedelta(minutes=5),
    **activity_options: Any,
) -> Any:
    """Call ``activity_fn(args)`` as an activity if the policy allows it (see the module doc).

    ``data``: dataset names or data classes the call touches; ``sensitive``: fail closed when
    this worker has no policy. Extra keyword arguments go to ``workflow.execute_activity``.
    """
    interrupts.tool_calls += 1
    call_id = f"t{interrupts.tool_calls}"
    request = {
        "tool": tool,
        "args": dict(args),
        "data": list(data),
        "agent": agent,
        "team": team,
        "sensitive": sensitive,
        "call_id": call_id,
    }
    raw: dict[str, Any] = await workflow.execute_local_activity(
        CHECK_ACTIVITY,
        request,
        start_to_close_timeout=_LOCAL_TIMEOUT,
        retry_policy=_LOCAL_RETRY,
        result_type=dict,
    )
    decision = PolicyDecision.model_validate(raw)
    if decision.outcome == "prohibit":
        raise ToolProhibitedError(tool, raw)
    final_args = dict(args)
    if decision.outcome == "require_approval":
        asked = policy_guard.approval_request(
            tool, final_args, decision, args_schema=args_schema, title=title
        )
        answer = await interrupts.ask(
            asked.title,
            action=asked.action,
            args=asked.args,
            args_schema=asked.args_schema,
            description=asked.description,
            allowed=asked.allowed_decisions,
            interrupt_id=f"{tool}-{call_id}",
            policy=asked.policy,
        )
        if answer.kind == "reject":
            raise ToolRejectedError(tool, str(asked.policy["rule"]), answer.feedback)
        if answer.kind == "respond":
            await _record(interrupts, request, decision)
            return answer.response
        final_args = answer.final_args(final_args)
    result = await workflow.execute_activity(
        activity_fn, final_args, start_to_close_timeout=start_to_close_timeout, **activity_options
    )
    await _record(interrupts, request, decision)
    return result


async def _record(
    interrupts: Interrupts, request: dict[str, Any], decision: PolicyDecision
) -> None:
    if not decision.obligations and not decision.waived:
        return  # nothing to open: no activity in the history
    opened: list[str] = await workflow.execute_local_activity(
        RECORD_ACTIVITY,
        {
            **request,
            "decision": decision.model_dump(mode="json"),
            # the workflow's clock: a retried record builds the same obligations
            "at": workflow.now().astimezone(UTC).isoformat(),
        },
        start_to_close_timeout=_LOCAL_TIMEOUT,
        retry_policy=_LOCAL_RETRY,
        result_type=list,
    )
    interrupts.obligations.extend(opened)


async def fulfil_obligation(obligation_id: str, note: str = "") -> None:
    """Tell the gateway the workflow fulfilled ``obligation_id`` (one of
    ``Interrupts.obligations``), from the local activity ``irq_policy_fulfil``."""
    await workflow.execute_local_activity(
        FULFIL_ACTIVITY,
        {"id": obligation_id, "note": note},
        start_to_close_timeout=_LOCAL_TIMEOUT,
        retry_policy=_LOCAL_RETRY,
    )


# ============================================================================ worker side


def _context() -> str:
    return os.environ.get(ENV_CONTEXT) or os.environ.get(ENV_AGENT_CONTEXT) or DEFAULT_CONTEXT


@activity.defn(name=CHECK_ACTIVITY)
async def irq_policy_check(request: dict[str, Any]) -> dict[str, Any]:
    """Evaluate the call against the policy this worker process holds; report the decision."""
    info = activity.info()
    tool = str(request["tool"])

    def check() -> dict[str, Any]:
        decision = policy_guard.check_call(
            tool,
            dict(request.get("args") or {}),
            data=list(request.get("data") or []),
            agent=str(request.get("agent") or ""),
            team=str(request.get("team") or ""),
            backend=BACKEND,
            context=_context(),
            native_id=info.workflow_id or "",
            sensitive=bool(request.get("sensitive")),
            wait_s=POLICY_WAIT_S,
        )
        policy_guard.report_decision(
            decision,
            tool=tool,
            backend=BACKEND,
            context=_context(),
            native_id=info.workflow_id or "",
            call_id=str(request["call_id"]),
        )
        return decision.model_dump(mode="json")

    return await asyncio.to_thread(check)


@activity.defn(name=RECORD_ACTIVITY)
async def irq_policy_record(request: dict[str, Any]) -> list[str]:
    """Open the obligations of a call that ran; returns their ids."""
    info = activity.info()
    decision = PolicyDecision.model_validate(request["decision"])
    opened = policy_guard.open_obligations(
        decision,
        at=datetime.fromisoformat(request["at"]),
        tool=str(request["tool"]),
        backend=BACKEND,
        context=_context(),
        native_id=info.workflow_id or "",
        call_id=str(request["call_id"]),
    )
    return [o.id for o in opened]


@activity.defn(name=FULFIL_ACTIVITY)
async def irq_policy_fulfil(request: dict[str, Any]) -> None:
    """Send ``obligation_fulfilled`` for one obligation of this workflow."""
    policy_guard.fulfil_obligation(
        str(request["id"]),
        str(request.get("note") or ""),
        backend=BACKEND,
        context=_context(),
        native_id=activity.info().workflow_id or "",
    )


def policy_activities() -> list[Callable[..., Any]]:
    """The activities :func:`guarded_tool` and :func:`fulfil_obligation` need, for
    ``Worker(activities=[*mine, *these])``."""
    return [irq_policy_check, irq_policy_record, irq_policy_fulfil]
