"""Sample agents built on irq's Temporal helpers (the Temporal adapter tests and
``benchmarks/temporal_observe.py`` run them; the demo has its own, ``console/demo/temporal/``).

- ``TrainAgent``: one long activity holding a GPU slice (kept on pause) and a lock (a real
  ``flock`` on a file, released on pause), reporting progress in its heartbeats.
- ``ApprovalAgent``: raises interrupts (in the common shape) and returns every decision
  delivered to it.
- ``IdleAgent``: runs until cancelled, optionally waiting on one interrupt (fleet filler).

Run them with ``python -m devtools.temporal_sample_worker ADDRESS TASK_QUEUE``.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from backend_adapters.temporal.agent import (
        AgentActivity,
        HeldResource,
        Interrupts,
        run_activity,
    )
    from console.demo.temporal.agents import FileLock

# ------------------------------------------------------------------------------ activities


def _log(report_dir: str, record: dict[str, Any]) -> None:
    with open(Path(report_dir) / "agent-report.jsonl", "a") as fh:
        fh.write(json.dumps(record) + "\n")


@activity.defn
async def train(params: dict[str, Any]) -> dict[str, Any]:
    info = activity.info()
    lock = FileLock(params["lock_path"])
    resources = [
        HeldResource(f"gpu:{params.get('gpu', 0)}", kind="gpu", on_pause="keep"),
        HeldResource(
            f"lock:{params['lock_path']}",
            kind="lock",
            on_pause="release",
            acquire=lock.acquire,
            release=lock.release,
        ),
    ]
    agent = AgentActivity(resources, cadence_s=float(params.get("cadence_s", 0.5)))
    try:
        async with agent:
            step = int(agent.resumed_progress.get("step", 0))
            _log(
                params["report_dir"],
                {
                    "event": "started",
                    "wf": info.workflow_id,
                    "attempt": info.attempt,
                    "from_step": step,
                    "report": agent.report,
                },
            )
            total = int(params.get("steps", 1000))
            while step < total:
                await asyncio.sleep(float(params.get("step_s", 0.2)))
                step += 1
                agent.beat(step=step, total=total)
    finally:
        _log(
            params["report_dir"],
            {
                "event": agent.outcome,
                "wf": info.workflow_id,
                "attempt": info.attempt,
                "report": agent.report,
                "progress": agent.progress,
            },
        )
    return agent.result()


# ------------------------------------------------------------------------------- workflows


@workflow.defn
class TrainAgent:
    @workflow.init
    def __init__(self, params: dict[str, Any]) -> None:
        self.irq = Interrupts()

    @workflow.run
    async def run(self, params: dict[str, Any]) -> dict[str, Any]:
        result = await run_activity(
            train,
            params,
            heartbeat_timeout_s=float(params.get("heartbeat_timeout_s", 3.0)),
            maximum_attempts=int(params.get("maximum_attempts", 0)),
        )
        return {"train": result}


@workflow.defn
class ApprovalAgent:
    @workflow.init
    def __init__(self, params: dict[str, Any]) -> None:
        self.irq = Interrupts()

    @workflow.run
    async def run(self, params: dict[str, Any]) -> dict[str, Any]:
        outcomes: list[dict[str, Any]] = []
        for spec in params.get("interrupts", []):
            proposed = dict(spec.get("args") or {})
            decision = await self.irq.ask(
                spec["title"],
                action=spec.get("action", ""),
                args=proposed,
                args_schema=spec.get("args_schema"),
                description=spec.get("description", ""),
                allowed=spec.get("allowed", ("approve", "edit", "reject", "respond")),
                interrupt_id=spec.get("id"),
            )
            outcomes.append(
                {
                    "interrupt_id": decision.interrupt_id,
                    "kind": decision.kind,
                    "ran_with": decision.final_args(proposed)
                    if decision.kind in ("approve", "edit")
                    else None,
                    "feedback": decision.feedback,
                    "response": decision.response,
                    "by": decision.by,
                    "update_id": decision.update_id,
                }
            )
        # keep the workflow open a little so late duplicate deliveries would still land
        await workflow.sleep(timedelta(seconds=float(params.get("linger_s", 0))))
        return {
            "outcomes": outcomes,
            "delivered": [
                {"interrupt_id": d.interrupt_id, "kind": d.kind, "update_id": d.update_id}
                for d in self.irq.delivered
            ],
        }


@workflow.defn
class IdleAgent:
    """Runs until cancelled; stands in for fleets of running workflows in the benchmark."""

    @workflow.init
    def __init__(self, params: dict[str, Any]) -> None:
        self.irq = Interrupts()

    @workflow.run
    async def run(self, params: dict[str, Any]) -> None:
        if params.get("ask"):
            await self.irq.ask(params["ask"], action="noop", allowed=("approve", "reject"))
        await workflow.wait_condition(lambda: False)


WORKFLOWS = [TrainAgent, ApprovalAgent, IdleAgent]
ACTIVITIES = [train]
