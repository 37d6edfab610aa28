"""The Temporal agents of ``irq demo``: workflows, activities and the plans they run.

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
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
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
    from console.demo.catalogue import (
        CUSTOMERS,
        DEPLOY_SCHEMA,
        DROP_SCHEMA,
        REFUND_SCHEMA,
        SERVICES,
        TABLES,
    )
    from console.demo.temporal.access_request import (
        AccessRequest,
        access_request_plan,
        open_access,
        scope_access,
    )
    from console.demo.temporal.change_approval import (
        ChangeApproval,
        apply_migration,
        change_approval_plan,
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

# ----------------------------------------------------------------------------------- plans


def _res(
    rid: str,
    kind: str,
    on_pause: str,
    *,
    on_cancel: str = "release",
    detail: str = "",
    lock_dir: Path | None = None,
) -> dict[str, Any]:
    """A resource spec; with ``lock_dir`` it is backed by a real flock on a file there."""
    spec: dict[str, Any] = {
        "id": rid,
        "kind": kind,
        "on_pause": on_pause,
        "on_cancel": on_cancel,
        "detail": detail,
    }
    if lock_dir is not None:
        spec["lock_path"] = str(lock_dir / (rid.replace("/", "_") + ".lock"))
    return spec


def _work_params(
    phases: list[list[Any]], resources: list[dict[str, Any]], step_s: float, scale: float
) -> dict[str, Any]:
    return {
        "phases": phases,
        "resources": resources,
        "step_s": round(step_s * scale, 3),
        "cadence_s": CADENCE_S,
    }


def gpu_training_plan(gen: int, rng: random.Random, locks: Path, scale: float) -> dict[str, Any]:
    model = rng.choice(["support-llama-8b", "triage-mistral-7b", "summarizer-qwen-14b"])
    gpu = _res(
        f"gpu-h100-1/slice-{gen % 2}",
        "gpu",
        "keep",
        detail="40 GB slice, kept on pause (expensive to re-acquire)",
    )
    data = _res(
        "dataset-lock/support-tickets",
        "lock",
        "release",
        detail="exclusive read snapshot",
        lock_dir=locks,
    )
    budget = _res(
        "gpu-budget/team-support",
        "budget",
        "keep",
        on_cancel="keep",
        detail="40 GPU-h/week; spent hours stay spent",
    )
    train = [[f"epoch {e}/3", 120] for e in range(1, 4)]
    return {
        "model": model,
        "train": {
            **_work_params(train, [gpu, data, budget], 2.0, scale),
            "result": {"checkpoint": f"s3://ckpt/{model}/gen-{gen:04d}"},
        },
        "evaluate": _work_params([["held-out eval", 15]], [gpu], 2.0, scale),
    }


def eval_runner_plan(gen: int, rng: random.Random, locks: Path, scale: float) -> dict[str, Any]:
    suite = rng.choice(["regression-suite", "safety-suite", "tool-use-suite"])
    resources = [
        _res(f"gpu-a100-2/slice-{gen % 4}", "gpu", "keep", detail="20 GB slice"),
        _res(
            f"eval-budget/{suite}",
            "budget",
            "keep",
            on_cancel="release",  # returned when the run ends; still held after: a leak
            detail="token budget for the suite",
        ),
    ]
    shards = [[f"shard {s}/4", 45] for s in range(1, 5)] + [["aggregate", 8]]
    return {"suite": suite, "eval": _work_params(shards, resources, 2.0, scale)}


def release_train_plan(gen: int, rng: random.Random, locks: Path, scale: float) -> dict[str, Any]:
    service = SERVICES[gen % len(SERVICES)]
    version = f"v3.{gen % 40}.{rng.randint(0, 9)}"
    runner = _res(f"ci-runner/t{gen % 3}", "sandbox", "keep", detail="warm build cache")
    lock = _res(
        f"deploy-lock/{service}", "lock", "release", detail="one deploy per service", lock_dir=locks
    )
    build = [["checkout", 4], ["build", 12], ["integration tests", 14]]
    return {
        "service": service,
        "agent": "deploy-agent",
        "team": "platform",
        "build": _work_params(build, [runner], 1.5, scale),
        "ask": {
            "id": "deploy",
            "title": f"Deploy {service} {version} to prod?",
            "description": f"412 integration tests passed on {version}; canary first, "
            "then the other regions.",
            "action": "deploy",
            "args": {
                "service": service,
                "version": version,
                "environment": "prod",
                "strategy": "canary",
                "canary_percent": 10,
                "regions": ["eu-west-1", "us-east-1"],
            },
            "args_schema": DEPLOY_SCHEMA,
            "allowed": ["approve", "edit", "reject"],
            "timeout_s": ASK_TIMEOUT_S,
        },
        "deploy": _work_params([["deploy", 1]], [lock], 2.0, scale),
    }


def research_assistant_plan(
    gen: int, rng: random.Random, locks: Path, scale: float
) -> dict[str, Any]:
    topic = rng.choice(["GPU spot pricing 2026", "EU AI Act obligations", "vector DB benchmarks"])
    gpu = _res(f"gpu-a100-0/slice-{gen % 4}", "gpu", "keep", detail="LLM inference")
    return {
        "topic": topic,
        "gather": _work_params([["search sources", 3], ["read papers", 4]], [gpu], 1.5, scale),
        "ask": {
            "id": "focus",
            "title": f"Research '{topic}': which angle should the report take?",
            "description": f"Found {rng.randint(18, 60)} sources; they disagree on scope.",
            "action": "ask_user",
            "args": {"question": "Focus on cost, on risk, or on both?"},
            "allowed": ["respond", "reject"],
            "timeout_s": ASK_TIMEOUT_S,
        },
        "write": _work_params([["write report", 1]], [gpu], 1.5, scale),
    }


def db_janitor_plan(gen: int, rng: random.Random, locks: Path, scale: float) -> dict[str, Any]:
    table = TABLES[gen % len(TABLES)]
    conn = _res("pg-conn/analytics", "connection", "release")
    lock = _res(
        f"pg-lock/analytics.{table}",
        "lock",
        "release",
        detail="ACCESS EXCLUSIVE",
        lock_dir=locks,
    )
    return {
        "table": table,
        "agent": "db-maintenance",
        "team": "platform",
        "scan": _work_params([["scan tables", 3], ["estimate savings", 2]], [conn], 1.5, scale),
        "ask": {
            "id": "drop",
            "title": f"Drop table analytics.{table}?",
            "description": f"Not read for {rng.randint(200, 700)} days; snapshot taken.",
            "action": "drop_table",
            "args": {
                "database": "analytics",
                "table": table,
                "rows": rng.randint(10_000, 90_000_000),
                "backup": f"s3://backups/{table}.dump",
            },
            "args_schema": DROP_SCHEMA,
            "sensitive": True,
            "allowed": ["approve", "reject"],
            "timeout_s": ASK_TIMEOUT_S,
        },
        "drop": _work_params([["drop table", 4], ["vacuum", 6]], [conn, lock], 1.5, scale),
    }


def support_triage_plan(gen: int, rng: random.Random, locks: Path, scale: float) -> dict[str, Any]:
    customer = CUSTOMERS[gen % len(CUSTOMERS)]
    amount = rng.choice([120, 640, 980, 1450])
    session = _res(f"zendesk-session/t{gen % 2}", "connection", "release")
    return {
        "customer": customer,
        "agent": "billing-agent",
        "team": "finance",
        "read": _work_params(
            [["read ticket", 2], ["check order history", 2]], [session], 1.5, scale
        ),
        "ask": {
            "id": "refund",
            "title": f"Refund {amount} EUR to {customer}?",
            "description": "Order arrived damaged; photos attached to the ticket.",
            "action": "issue_refund",
            "args": {
                "customer": customer,
                "amount": amount,
                "currency": "EUR",
                "reason": "damaged on arrival",
            },
            "args_schema": REFUND_SCHEMA,
            "allowed": ["approve", "edit", "reject"],
            "timeout_s": ASK_TIMEOUT_S,
        },
        "refund": _work_params(
            [["issue refund", 3], ["reply to customer", 3]], [session], 1.5, scale
        ),
    }


@dataclass(frozen=True)
class Lane:
    """One kind of demo agent: its workflow type, and the plan of generation ``gen``."""

    name: str  # workflow type and workflow-id prefix
    workflow: type
    plan: Callable[[int, random.Random, Path, float], dict[str, Any]]
    #: seconds between a run closing and the next starting (None: the fleet's default); a
    #: person's answer to a native wait should soon be followed by the next wait
    restart_s: tuple[float, float] | None = None

    def workflow_id(self, gen: int) -> str:
        return f"{self.name}-{gen:04d}"

    def generation(self, workflow_id: str) -> int:
        head, _, tail = workflow_id.rpartition("-")
        return int(tail) if head == self.name and tail.isdigit() else 0

    def plan_for(
        self,
        gen: int,
        locks: Path,
        scale: float = 1.0,
        *,
        guarded: bool = False,
        heartbeat_timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """The plan of generation ``gen``; ``heartbeat_timeout_s`` (None: the demo's
        :data:`HEARTBEAT_TIMEOUT_S`) goes into every step's parameters: part of the
        workflow's input, so a replay schedules its activities with the same timeout."""
        plan = self.plan(gen, random.Random(f"{self.name}/{gen}"), locks, scale)
        if heartbeat_timeout_s is not None:
            plan = {
                key: {**value, "heartbeat_timeout_s": heartbeat_timeout_s}
                if isinstance(value, dict) and "phases" in value
                else value
                for key, value in plan.items()
            }
        return {**plan, "guarded": True} if guarded else plan


LANES = [
    Lane("gpu-training", GpuTrainingAgent, gpu_training_plan),
    Lane("research-assistant", ResearchAssistantAgent, research_assistant_plan),
    Lane("support-triage", SupportTriageAgent, support_triage_plan),
    Lane("db-janitor", DbJanitorAgent, db_janitor_plan),
    Lane("release-train", ReleaseTrainAgent, release_train_plan),
    Lane("eval-runner", EvalRunnerAgent, eval_runner_plan),
    Lane("change-approval", ChangeApproval, change_approval_plan, restart_s=(3.0, 6.0)),
    Lane("access-request", AccessRequest, access_request_plan, restart_s=(3.0, 6.0)),
]
