"""The lanes of the Temporal part of ``irq demo``: each lane's workflow type and the plan a
generation of it runs (phases, resources backed by real flocks, the tool calls it asks about).

The workflows and activities are in ``agents.py``; the demo worker (``fleet.py``) keeps one
workflow of every lane in :data:`LANES` alive, generation after generation.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.demo.catalogue import (
    CUSTOMERS,
    DEPLOY_SCHEMA,
    DROP_SCHEMA,
    REFUND_SCHEMA,
    SERVICES,
    TABLES,
)
from console.demo.temporal.access_request import AccessRequest, access_request_plan
from console.demo.temporal.agents import (
    ASK_TIMEOUT_S,
    CADENCE_S,
    DbJanitorAgent,
    EvalRunnerAgent,
    GpuTrainingAgent,
    ReleaseTrainAgent,
    ResearchAssistantAgent,
    SupportTriageAgent,
)
from console.demo.temporal.change_approval import ChangeApproval, change_approval_plan


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
