"""The DBOS demo fleet's plans: what each kind of agent does, holds and asks, in the plan shape
``console/demo/dbos/agents.py`` interprets (journaled steps, resources, interrupts).

Kinds rotate over lanes, so any fleet of 8 or more agents shows every kind: deploys waiting
for approval, emails whose recipients an operator can edit, a table drop, a question for the
user, and long GPU jobs that are worth pausing rather than cancelling.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from console.demo.catalogue import (
    CUSTOMERS,
    DEPLOY_SCHEMA,
    DROP_SCHEMA,
    EMAIL_SCHEMA,
    REFUND_SCHEMA,
    SERVICES,
    TABLES,
)


def _s(name: str, seconds: float) -> dict[str, Any]:
    return {"step": name, "seconds": seconds}


def release_train(lane: int, gen: int, rng: random.Random) -> dict[str, Any]:
    service = SERVICES[lane % len(SERVICES)]
    version = f"v2.{gen % 40}.{rng.randint(0, 9)}"
    return {
        "name": f"release-train/{service}",
        "resources": [
            {
                "id": f"deploy-lock/{service}",
                "kind": "lock",
                "on_pause": "release",
                "detail": "one deploy per service",
            },
            {
                "id": f"ci-runner/{lane}",
                "kind": "sandbox",
                "on_pause": "keep",
                "detail": "warm build cache",
            },
        ],
        "script": [
            _s("checkout", 2),
            _s("build", 5),
            _s("integration tests", 6),
            {
                "interrupt": {
                    "title": f"Deploy {service} {version} to prod?",
                    "description": "All 412 integration tests passed; canary first.",
                    "action": "deploy",
                    "args": {
                        "service": service,
                        "version": version,
                        "environment": "prod",
                        "strategy": "canary",
                        "canary_percent": 10,
                        "regions": ["eu-west-1"],
                    },
                    "args_schema": DEPLOY_SCHEMA,
                    "allowed": ["approve", "edit", "reject"],
                    "timeout_s": 900,
                },
                "then": [_s("deploy canary", 4), _s("verify metrics", 4)],
            },
        ],
    }


def outreach(lane: int, gen: int, rng: random.Random) -> dict[str, Any]:
    customer = CUSTOMERS[(lane + gen) % len(CUSTOMERS)]
    return {
        "name": f"outreach/{customer}",
        "resources": [
            {
                "id": f"email-quota/{lane}",
                "kind": "budget",
                "on_pause": "keep",
                "detail": "50 emails/day",
            },
            {"id": f"crm-session/{lane}", "kind": "connection", "on_pause": "release"},
        ],
        "script": [
            _s("research account", 4),
            _s("draft email", 5),
            {
                "interrupt": {
                    "title": f"Send renewal email to {customer}?",
                    "description": "Draft mentions the 12% discount approved by sales.",
                    "action": "send_email",
                    "args": {
                        "to": [f"cfo@{customer}"],
                        "cc": [f"am-team@{customer}"],
                        "subject": "Your renewal: 12% off until Friday",
                        "body": "Hi, following our call, here is the renewal offer...",
                    },
                    "args_schema": EMAIL_SCHEMA,
                    "allowed": ["approve", "edit", "reject"],
                    "timeout_s": 900,
                },
                "then": [_s("send email", 2), _s("log to CRM", 2)],
            },
        ],
    }


def db_janitor(lane: int, gen: int, rng: random.Random) -> dict[str, Any]:
    table = TABLES[(lane + gen) % len(TABLES)]
    return {
        "name": f"db-janitor/{table}",
        "resources": [
            {
                "id": f"pg-lock/analytics.{table}",
                "kind": "lock",
                "on_pause": "release",
                "detail": "ACCESS EXCLUSIVE",
            },
            {"id": f"pg-conn/{lane}", "kind": "connection", "on_pause": "release"},
        ],
        "script": [
            _s("scan tables", 4),
            _s("estimate savings", 3),
            {
                "interrupt": {
                    "title": f"Drop table analytics.{table}?",
                    "description": "Not read for 412 days; snapshot taken.",
                    "action": "drop_table",
                    "args": {
                        "database": "analytics",
                        "table": table,
                        "rows": rng.randint(10_000, 90_000_000),
                        "last_read": "2025-10-02",
                        "backup": f"s3://backups/{table}.dump",
                    },
                    "args_schema": DROP_SCHEMA,
                    "allowed": ["approve", "reject"],
                    "timeout_s": 900,
                },
                "then": [_s("drop table", 2), _s("vacuum", 4)],
            },
        ],
    }


def research_assistant(lane: int, gen: int, rng: random.Random) -> dict[str, Any]:
    return {
        "name": "research-assistant",
        "resources": [
            {
                "id": f"gpu-a100-0/slice-{lane % 4}",
                "kind": "gpu",
                "on_pause": "keep",
                "detail": "20 GB slice, LLM inference",
            },
        ],
        "script": [
            _s("search sources", 4),
            _s("read papers", 6),
            {
                "interrupt": {
                    "title": "Which market should the report focus on?",
                    "description": "Found 38 sources; EU and US data differ a lot.",
                    "action": "ask_user",
                    "args": {"question": "Which market should the report focus on (EU, US, both)?"},
                    "allowed": ["respond", "reject"],
                    "timeout_s": 900,
                },
                "then": [_s("write report", 6)],
            },
        ],
    }


def fine_tune(lane: int, gen: int, rng: random.Random) -> dict[str, Any]:
    return {
        "name": "fine-tune/support-model",
        "resources": [
            {
                "id": f"gpu-h100-1/slice-{lane % 4}",
                "kind": "gpu",
                "on_pause": "keep",
                "detail": "40 GB slice, kept on pause (expensive to re-acquire)",
            },
            {"id": "dataset-lock/support-tickets", "kind": "lock", "on_pause": "release"},
        ],
        "script": [_s("load dataset", 4)]
        + [_s(f"train epoch {e}", 8) for e in range(1, 5)]
        + [_s("evaluate", 5), _s("upload checkpoint", 3)],
    }


def support_refund(lane: int, gen: int, rng: random.Random) -> dict[str, Any]:
    customer = CUSTOMERS[(lane * 3 + gen) % len(CUSTOMERS)]
    amount = rng.choice([120, 640, 980, 1450])
    return {
        "name": f"support-triage/{customer}",
        "resources": [
            {"id": f"zendesk-session/{lane}", "kind": "connection", "on_pause": "release"},
        ],
        "script": [
            _s("read ticket", 3),
            _s("check order history", 4),
            {
                "interrupt": {
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
                    "timeout_s": 900,
                },
                "then": [_s("issue refund", 2), _s("reply to customer", 2)],
            },
        ],
    }


def data_ingest(lane: int, gen: int, rng: random.Random) -> dict[str, Any]:
    return {
        "name": "ingest/clickstream",
        "resources": [
            {"id": f"kafka-consumer/{lane}", "kind": "connection", "on_pause": "release"},
            {
                "id": f"sandbox/{lane}",
                "kind": "sandbox",
                "on_pause": "keep",
                "on_cancel": "release",
            },
        ],
        "script": [_s(f"ingest batch {b}", 5) for b in range(1, 6)] + [_s("compact", 4)],
    }


def eval_runner(lane: int, gen: int, rng: random.Random) -> dict[str, Any]:
    return {
        "name": "eval-runner/regression-suite",
        "resources": [
            {"id": f"gpu-a100-2/slice-{lane % 4}", "kind": "gpu", "on_pause": "keep"},
            {
                "id": f"eval-budget/{lane}",
                "kind": "budget",
                "on_pause": "keep",
                "on_cancel": "keep",
                "detail": "spent tokens stay spent",
            },
        ],
        "script": [_s(f"eval shard {s}/4", 6) for s in range(1, 5)] + [_s("aggregate", 3)],
    }


KINDS: list[tuple[str, Callable[[int, int, random.Random], dict[str, Any]]]] = [
    ("release-train", release_train),
    ("outreach", outreach),
    ("fine-tune", fine_tune),
    ("db-janitor", db_janitor),
    ("research", research_assistant),
    ("ingest", data_ingest),
    ("support", support_refund),
    ("eval", eval_runner),
]


def lane_prefix(lane: int) -> str:
    return f"{KINDS[lane % len(KINDS)][0]}-{lane:02d}-"


def plan_for(
    lane: int,
    gen: int,
    *,
    board: str,
    log: str | None = None,
    step_scale: float = 1.0,
    interval_s: float = 2.0,
    timeout_s: float = 10.0,
) -> dict[str, Any]:
    rng = random.Random(lane * 7919 + gen)
    plan = KINDS[lane % len(KINDS)][1](lane, gen, rng)

    def scale(items: list[dict[str, Any]]) -> None:
        for item in items:
            if "seconds" in item:
                item["seconds"] = round(item["seconds"] * step_scale, 2)
            scale(item.get("then", []))

    scale(plan["script"])
    plan.update(
        board=board, log=log, interval_s=interval_s, timeout_s=timeout_s, decision_poll_s=1.0
    )
    return plan
