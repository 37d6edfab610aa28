"""The Temporal agents of ``irq demo``: workflows and activities (the lanes and the plans they
run are in ``lanes.py``).

Eight lanes, one workflow type each; the demo worker (``fleet.py``) keeps one workflow of every
lane alive, generation after generation (``<lane>-<gen>``, e.g. ``release-train-0003``):

- ``gpu-training``: fine-tunes a model (~12 min), then evaluates the checkpoint;
- ``eval-runner``: runs a regression suite shard by shard (~6 min);
- ``release-train``: builds and tests, asks to deploy (args with a schema: approve, edit,
  reject), then deploys region by region;
- ``research-assistant``: gathers sources, asks the user a question (respond, reject),
  writes the report;
- ``db-janitor``: scans tables, asks to drop a stale one (approve, reject);
- ``support-triage``: reads a ticket, proposes a refund (approve, edit, reject);
- ``change-approval`` and ``access-request``: plain Temporal, no irq code; they wait for a
  person in ``wait_condition`` until a signal / an update arrives (their modules say more).

Guarded plans (the worker's ``--guarded``, which ``irq demo`` sets when its gateway runs the
demo policy) call the deploy, the table drop and the refund through the policy guard
(:func:`~backend_adapters.temporal.policy_tools.guarded_tool`): the policy decides whether the
call runs, is refused or waits for an approval naming its rule (a prod deploy: two approvers; a
drop: an admin; a refund over 100 EUR); unguarded plans ask before each of them, as before.

Every activity is an :class:`~backend_adapters.temporal.agent.AgentActivity`: it heartbeats
``{step, total, phase}`` and its resource manifest (GPU slices kept on pause, locks released
on pause; the locks are real ``flock``\\ s on files in the demo directory), continues from its
last heartbeat after a pause or a crash, and releases per policy on pause and cancel. An
unanswered interrupt is withdrawn after :data:`ASK_TIMEOUT_S` (30 min) and the lane starts
over.

The worker uses Worker Versioning and pins its workflows to the version that started them
(``VERSIONING_BEHAVIOR_PINNED``), except ``eval-runner``, declared ``AUTO_UPGRADE`` on
purpose: the one lane whose runs show irq's "application version not pinned" warning.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.common import VersioningBehavior

with workflow.unsafe.imports_passed_through():
    from backend_adapters.temporal.agent import (
        AgentActivity,
        DecisionReceived,
        HeldResource,
        Interrupts,
        run_activity,
    )
    from backend_adapters.temporal.policy_tools import (
        ToolProhibitedError,
        ToolRejectedError,
        guarded_tool,
    )
    from console.demo.temporal.access_request import (
        AccessRequest,
        open_access,
        scope_access,
    )
    from console.demo.temporal.change_approval import (
        ChangeApproval,
        apply_migration,
        plan_migration,
    )

#: heartbeat timeout of every demo activity (pause, cancel and a dead worker show within it)
HEARTBEAT_TIMEOUT_S = 10.0
#: how often an idle activity heartbeats anyway (the worker flushes at most every second)
CADENCE_S = 2.0
#: an interrupt nobody answers is withdrawn after this long; the lane then starts over
ASK_TIMEOUT_S = 1800.0


# ------------------------------------------------------------------------------ activities


class FileLock:
    """A real exclusive lock (``flock``) on a file; tests check it from outside."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def _resources(specs: list[dict[str, Any]]) -> list[HeldResource]:
    out: list[HeldResource] = []
    for spec in specs:
        lock = FileLock(spec["lock_path"]) if spec.get("lock_path") else None
        out.append(
            HeldResource(
                spec["id"],
                kind=spec.get("kind", "resource"),
                on_pause=spec.get("on_pause", "keep"),
                on_cancel=spec.get("on_cancel", "release"),
                detail=spec.get("detail", ""),
                acquire=lock.acquire if lock else None,
                release=lock.release if lock else None,
            )
        )
    return out


async def _work(params: dict[str, Any]) -> dict[str, Any]:
    """Phases of steps (``[[name, steps], ...]``, ``step_s`` each), heartbeating progress
    ``{step, total, phase}`` and the resource manifest; resumes from the last heartbeat."""
    phases: list[tuple[str, int]] = [(str(n), int(s)) for n, s in params["phases"]]
    total = sum(steps for _, steps in phases)

    def phase_at(step: int) -> str:
        done = 0
        for name, steps in phases:
            done += steps
            if step < done:
                return name
        return phases[-1][0]

    agent = AgentActivity(
        _resources(params.get("resources", [])),
        cadence_s=float(params.get("cadence_s", CADENCE_S)),
    )
    async with agent:
        step = min(int(agent.resumed_progress.get("step", 0)), total)
        agent.beat(step=step, total=total, phase=phase_at(step))
        while step < total:
            await asyncio.sleep(float(params.get("step_s", 1.5)))
            step += 1
            agent.beat(step=step, total=total, phase=phase_at(step))
    return agent.result(**dict(params.get("result") or {}))


@activity.defn
async def use_tool(args: dict[str, Any]) -> dict[str, Any]:
    """A guarded tool call itself (the policy let it run): returns the arguments it ran with,
    an operator's edit included; the workflow's next activities carry out the rest."""
    activity.heartbeat({"tool_args": args})
    await asyncio.sleep(0.5)
    return {"args": args}


@activity.defn
async def train_model(params: dict[str, Any]) -> dict[str, Any]:
    return await _work(params)


@activity.defn
async def evaluate_checkpoint(params: dict[str, Any]) -> dict[str, Any]:
    return await _work(params)


@activity.defn
async def run_eval_suite(params: dict[str, Any]) -> dict[str, Any]:
    return await _work(params)


@activity.defn
async def build_and_test(params: dict[str, Any]) -> dict[str, Any]:
    return await _work(params)


@activity.defn
async def deploy_release(params: dict[str, Any]) -> dict[str, Any]:
    return await _work(params)


@activity.defn
async def gather_sources(params: dict[str, Any]) -> dict[str, Any]:
    return await _work(params)


@activity.defn
async def write_report(params: dict[str, Any]) -> dict[str, Any]:
    return await _work(params)


@activity.defn
async def scan_tables(params: dict[str, Any]) -> dict[str, Any]:
    return await _work(params)


@activity.defn
async def drop_table(params: dict[str, Any]) -> dict[str, Any]:
    return await _work(params)


@activity.defn
async def read_ticket(params: dict[str, Any]) -> dict[str, Any]:
    return await _work(params)


@activity.defn
async def issue_refund(params: dict[str, Any]) -> dict[str, Any]:
    return await _work(params)


# ------------------------------------------------------------------------------- workflows


async def _step(fn: Callable[..., Any], params: dict[str, Any]) -> dict[str, Any]:
    timeout_s = float(params.get("heartbeat_timeout_s", HEARTBEAT_TIMEOUT_S))
    result = await run_activity(fn, params, heartbeat_timeout_s=timeout_s)
    return {"progress": result.get("progress"), "report": result.get("report")}


async def _ask(irq: Interrupts, spec: dict[str, Any]) -> DecisionReceived | None:
    """The decision on ``spec``, or None when nobody answered within its timeout."""
    try:
        return await irq.ask(
            spec["title"],
            action=spec["action"],
            args=dict(spec.get("args") or {}),
            args_schema=spec.get("args_schema"),
            description=spec.get("description", ""),
            allowed=spec["allowed"],
            interrupt_id=spec.get("id"),
            timeout=timedelta(seconds=float(spec.get("timeout_s", ASK_TIMEOUT_S))),
        )
    except TimeoutError:
        return None


async def _call(
    irq: Interrupts, plan: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The tool call ``plan["ask"]`` describes: through the policy guard when the plan is
    guarded, else as a plain interrupt. The outcome, and the final arguments when it may run."""
    ask = plan["ask"]
    if not plan.get("guarded"):
        decision = await _ask(irq, ask)
        if decision is None or decision.kind == "reject":
            return _outcome(decision), None
        return _outcome(decision), decision.final_args(dict(ask["args"]))
    try:
        ran = await guarded_tool(
            irq,
            ask["action"],
            dict(ask.get("args") or {}),
            use_tool,
            agent=str(plan.get("agent") or ""),
            team=str(plan.get("team") or ""),
            data=list(ask.get("data") or []),
            sensitive=bool(ask.get("sensitive")),
            args_schema=ask.get("args_schema"),
            title=ask.get("title"),
            start_to_close_timeout=timedelta(seconds=60),
        )
    except ToolProhibitedError as refused:
        return {"outcome": "prohibited", "note": refused.message}, None
    except ToolRejectedError as rejected:
        return {"outcome": "reject", "note": rejected.message}, None
    return {"outcome": "ran"}, dict(ran["args"])


def _outcome(decision: DecisionReceived | None) -> dict[str, Any]:
    if decision is None:
        return {"outcome": "expired", "note": "nobody decided in time; starting over"}
    return {"outcome": decision.kind, "by": decision.by, "feedback": decision.feedback}


@workflow.defn(name="gpu-training")
class GpuTrainingAgent:
    """Fine-tunes a model on a GPU slice (kept on pause), holding a dataset lock (released
    on pause), then evaluates the checkpoint."""

    @workflow.init
    def __init__(self, plan: dict[str, Any]) -> None:
        self.irq = Interrupts()

    @workflow.run
    async def run(self, plan: dict[str, Any]) -> dict[str, Any]:
        trained = await _step(train_model, plan["train"])
        evaluated = await _step(evaluate_checkpoint, plan["evaluate"])
        return {"model": plan["model"], "train": trained, "evaluate": evaluated}


@workflow.defn(name="eval-runner", versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class EvalRunnerAgent:
    """Runs a regression suite shard by shard on a GPU slice, spending an eval budget.
    Unpinned on purpose (AUTO_UPGRADE): the demo's one run with the version warning."""

    @workflow.init
    def __init__(self, plan: dict[str, Any]) -> None:
        self.irq = Interrupts()

    @workflow.run
    async def run(self, plan: dict[str, Any]) -> dict[str, Any]:
        return {"suite": plan["suite"], "eval": await _step(run_eval_suite, plan["eval"])}


@workflow.defn(name="release-train")
class ReleaseTrainAgent:
    """Builds and tests a service, asks to deploy it (args with a schema: approve, edit or
    reject), then deploys region by region with the arguments the operator approved."""

    @workflow.init
    def __init__(self, plan: dict[str, Any]) -> None:
        self.irq = Interrupts()

    @workflow.run
    async def run(self, plan: dict[str, Any]) -> dict[str, Any]:
        await _step(build_and_test, plan["build"])
        outcome, args = await _call(self.irq, plan)
        if args is None:
            return {"service": plan["service"], **outcome}
        pct = int(args.get("canary_percent", 10))
        regions = list(args.get("regions") or ["eu-west-1"])
        phases = [[f"{args.get('strategy', 'canary')} {pct}% {r}", 8] for r in regions]
        phases += [[f"verify metrics {r}", 6] for r in regions]
        deploy = {**plan["deploy"], "phases": phases, "result": {"deployed": args}}
        return {
            "service": plan["service"],
            **outcome,
            "deploy": await _step(deploy_release, deploy),
        }


@workflow.defn(name="research-assistant")
class ResearchAssistantAgent:
    """Gathers sources with an LLM on a GPU slice, asks the user which angle to take
    (respond, or reject to stop), then writes the report."""

    @workflow.init
    def __init__(self, plan: dict[str, Any]) -> None:
        self.irq = Interrupts()

    @workflow.run
    async def run(self, plan: dict[str, Any]) -> dict[str, Any]:
        await _step(gather_sources, plan["gather"])
        decision = await _ask(self.irq, plan["ask"])
        if decision is None or decision.kind == "reject":
            return {"topic": plan["topic"], **_outcome(decision)}
        focus = str(decision.response if decision.response is not None else "")[:60]
        report = {**plan["write"], "result": {"focus": focus}}
        report["phases"] = [[f"write report ({focus or 'no focus given'})", 20], ["cite", 6]]
        return {
            "topic": plan["topic"],
            "focus": focus,
            **_outcome(decision),
            "report": await _step(write_report, report),
        }


@workflow.defn(name="db-janitor")
class DbJanitorAgent:
    """Scans a warehouse for stale tables and asks before dropping one (approve/reject)."""

    @workflow.init
    def __init__(self, plan: dict[str, Any]) -> None:
        self.irq = Interrupts()

    @workflow.run
    async def run(self, plan: dict[str, Any]) -> dict[str, Any]:
        await _step(scan_tables, plan["scan"])
        outcome, args = await _call(self.irq, plan)
        if args is None:
            return {"table": plan["table"], **outcome}
        return {"table": plan["table"], **outcome, "drop": await _step(drop_table, plan["drop"])}


@workflow.defn(name="support-triage")
class SupportTriageAgent:
    """Reads a support ticket and proposes a refund (approve, edit the amount, or reject)."""

    @workflow.init
    def __init__(self, plan: dict[str, Any]) -> None:
        self.irq = Interrupts()

    @workflow.run
    async def run(self, plan: dict[str, Any]) -> dict[str, Any]:
        await _step(read_ticket, plan["read"])
        outcome, args = await _call(self.irq, plan)
        if args is None:
            return {"customer": plan["customer"], **outcome}
        refund = {**plan["refund"], "result": {"refunded": args}}
        return {
            "customer": plan["customer"],
            **outcome,
            "refund": await _step(issue_refund, refund),
        }


WORKFLOWS = [
    GpuTrainingAgent,
    EvalRunnerAgent,
    ReleaseTrainAgent,
    ResearchAssistantAgent,
    DbJanitorAgent,
    SupportTriageAgent,
    ChangeApproval,  # plain Temporal: waits for a signal (change_approval.py)
    AccessRequest,  # plain Temporal: waits for an update (access_request.py)
]
ACTIVITIES = [
    plan_migration,
    apply_migration,
    scope_access,
    open_access,
    use_tool,
    train_model,
    evaluate_checkpoint,
    run_eval_suite,
    build_and_test,
    deploy_release,
    gather_sources,
    write_report,
    scan_tables,
    drop_table,
    read_ticket,
    issue_refund,
]
