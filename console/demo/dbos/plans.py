"""The DBOS demo fleet's plans: what each kind of agent does, holds and calls, in the plan shape
``console/demo/dbos/agents.py`` interprets (journaled steps, resources, tool calls, questions).

Kinds rotate over lanes, so any fleet of 10 or more agents shows every kind: prod deploys,
emails whose recipients an operator can edit, a backup that may never be deleted and a table
drop, a question for the user, refunds small and large, PHI reports (one by the research team,
one by compliance), and long GPU jobs that are worth pausing rather than cancelling.

Every agent has a name and a team (``agent``, ``team``): the demo policy
(``console/demo/policy.toml``) decides on their tool calls by them. A ``tool`` item is a tool
call: guarded (the worker's ``--guarded``, which ``irq demo`` sets), the policy decides whether
it runs, is refused or waits for an approval; unguarded (a gateway without a policy), the item's
``ask`` is raised as a plain interrupt before the tool runs, as the demo did before policies.
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
    REPORT_SCHEMA,
    SERVICES,
    TABLES,
)


def _s(name: str, seconds: float) -> dict[str, Any]:
    return {"step": name, "seconds": seconds}


def _tool(
    name: str,
    step: str,
    seconds: float,
    args: dict[str, Any],
    *,
    title: str,
    ask: dict[str, Any] | None = None,
    args_schema: dict[str, Any] | None = None,
    data: list[str] | None = None,
    sensitive: bool = False,
) -> dict[str, Any]:
    """A tool call item: ``step`` is the journaled step that does the work (``seconds`` long);
    ``ask`` (description, allowed, timeout_s) is the plain interrupt raised before it when the
    agent runs without the policy guard (no ``ask``: it just runs)."""
    return {
        "name": name,
        "step": step,
        "seconds": seconds,
        "args": args,
        "title": title,
        "ask": ask,
        "args_schema": args_schema,
        "data": list(data or []),
        "sensitive": sensitive,
    }


def _ask(description: str, allowed: list[str]) -> dict[str, Any]:
    return {"description": description, "allowed": allowed, "timeout_s": 900}


def release_train(lane: int, gen: int, rng: random.Random) -> dict[str, Any]:
    service = SERVICES[lane % len(SERVICES)]
    version = f"v2.{gen % 40}.{rng.randint(0, 9)}"
    return {
        "name": f"release-train/{service}",
        "agent": "deploy-agent",
        "team": "platform",
        "resources": [
            {
                "id": f"prod-deploy-lock/{service}",
                "kind": "lock",
                "on_pause": "release",
                "detail": "one prod deploy per service",
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
                "tool": _tool(
                    "deploy",
                    "deploy canary",
                    4,
                    {
                        "service": service,
                        "version": version,
                        "environment": "prod",
                        "strategy": "canary",
                        "canary_percent": 10,
                        "regions": ["eu-west-1"],
                    },
                    title=f"Deploy {service} {version} to prod?",
                    ask=_ask(
                        "All 412 integration tests passed; canary first.",
                        ["approve", "edit", "reject"],
                    ),
                    args_schema=DEPLOY_SCHEMA,
                ),
                "then": [_s("verify metrics", 4)],
            },
        ],
    }


def outreach(lane: int, gen: int, rng: random.Random) -> dict[str, Any]:
    customer = CUSTOMERS[(lane + gen) % len(CUSTOMERS)]
    return {
        "name": f"outreach/{customer}",
        "agent": "outreach-agent",
        "team": "sales",
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
                "tool": _tool(
                    "send_email",
                    "send email",
                    2,
                    {
                        "to": [f"cfo@{customer}"],
                        "cc": [f"am-team@{customer}"],
                        "subject": "Your renewal: 12% off until Friday",
                        "body": "Hi, following our call, here is the renewal offer...",
                    },
                    title=f"Send renewal email to {customer}?",
                    ask=_ask(
                        "Draft mentions the 12% discount approved by sales.",
                        ["approve", "edit", "reject"],
                    ),
                    args_schema=EMAIL_SCHEMA,
                    data=["customers"],
                ),
                "then": [_s("log to CRM", 2)],
            },
        ],
    }


def db_janitor(lane: int, gen: int, rng: random.Random) -> dict[str, Any]:
    table = TABLES[(lane + gen) % len(TABLES)]
    return {
        "name": f"db-janitor/{table}",
        "agent": "db-maintenance",
        "team": "platform",
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
            # the policy never lets an agent delete a backup: refused and recorded, the run
            # goes on (without the guard: pruned without asking, as before policies)
            {
                "tool": _tool(
                    "delete_backup",
                    "prune old backup",
                    1,
                    {"backup": f"s3://backups/{table}.2024.dump"},
                    title=f"Delete the 2024 backup of {table}?",
                    sensitive=True,
                )
            },
            _s("estimate savings", 3),
            {
                "tool": _tool(
                    "drop_table",
                    "drop table",
                    2,
                    {
                        "database": "analytics",
                        "table": table,
                        "rows": rng.randint(10_000, 90_000_000),
                        "last_read": "2025-10-02",
                        "backup": f"s3://backups/{table}.dump",
                    },
                    title=f"Drop table analytics.{table}?",
                    ask=_ask("Not read for 412 days; snapshot taken.", ["approve", "reject"]),
                    args_schema=DROP_SCHEMA,
                    sensitive=True,
                ),
                "then": [_s("vacuum", 4)],
            },
        ],
    }


def research_assistant(lane: int, gen: int, rng: random.Random) -> dict[str, Any]:
    # a question for the user, not a tool call: no policy decides it
    return {
        "name": "research-assistant",
        "agent": "research-assistant",
        "team": "research",
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
        "agent": "training-agent",
        "team": "ml",
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
    amount = rng.choice([250, 640, 980, 1450])

    def refund(value: int, reason: str, step: str, *, asks: bool) -> dict[str, Any]:
        ask = _ask(
            "Order arrived damaged; photos attached to the ticket.", ["approve", "edit", "reject"]
        )
        return {
            "tool": _tool(
                "issue_refund",
                step,
                2,
                {"customer": customer, "amount": value, "currency": "EUR", "reason": reason},
                title=f"Refund {value} EUR to {customer}?",
                ask=ask if asks else None,
                args_schema=REFUND_SCHEMA,
            )
        }

    return {
        "name": f"support-triage/{customer}",
        "agent": "billing-agent",
        "team": "finance",
        "resources": [
            {"id": f"zendesk-session/{lane}", "kind": "connection", "on_pause": "release"},
        ],
        "script": [
            _s("read ticket", 3),
            # unguarded, a shipping refund never asked
            refund(40, "late delivery", "refund shipping", asks=False),
            _s("check order history", 4),
            {
                **refund(amount, "damaged on arrival", "issue refund", asks=True),
                "then": [_s("reply to customer", 2)],
            },
        ],
    }


def phi_report(agent: str, team: str) -> Callable[[int, int, random.Random], dict[str, Any]]:
    """A monthly report over ``monthly_summary`` (derived from cohort_stats, derived from the
    PHI dataset ``patients``): the export needs approval and, outside the compliance team,
    obliges a notice to the CISO within 10 minutes."""

    def plan(lane: int, gen: int, rng: random.Random) -> dict[str, Any]:
        month = f"2026-{(gen % 12) + 1:02d}"
        return {
            "name": f"{agent.removesuffix('-agent')}-report/{month}",
            "agent": agent,
            "team": team,
            "resources": [
                {"id": f"warehouse-session/{lane}", "kind": "connection", "on_pause": "release"},
            ],
            "script": [
                _s("aggregate cohorts", 4),
                {
                    "tool": _tool(
                        "export_report",
                        "export report",
                        2,
                        {"dataset": "monthly_summary", "month": month, "format": "pdf"},
                        title=f"Export the {month} monthly summary?",
                        ask=_ask(
                            "Built from cohort statistics of patient records.",
                            ["approve", "edit", "reject"],
                        ),
                        args_schema=REPORT_SCHEMA,
                        data=["monthly_summary"],
                    ),
                    "then": [_s("publish report", 2)],
                },
            ],
        }

    return plan


def data_ingest(lane: int, gen: int, rng: random.Random) -> dict[str, Any]:
    return {
        "name": "ingest/clickstream",
        "agent": "ingest-agent",
        "team": "data",
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
        "agent": "eval-agent",
        "team": "ml",
        "resources": [
            {"id": f"gpu-a100-2/slice-{lane % 4}", "kind": "gpu", "on_pause": "keep"},
            {
                "id": f"eval-budget/{lane}",
                "kind": "budget",
                "on_pause": "keep",
                # returned when the run ends (the spent tokens stay spent); a run that ends
                # still holding it is a leak (irq leaks)
                "on_cancel": "release",
                "detail": "token budget for the suite",
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
    ("analytics", phi_report("analytics-agent", "research")),
    ("compliance", phi_report("compliance-agent", "compliance")),
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
    guarded: bool = False,
    builder: Callable[[int, int, random.Random], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The plan of generation ``gen`` of ``lane``: its kind's (or ``builder``'s) plan, its steps
    scaled by ``step_scale``, with the worker's settings."""
    rng = random.Random(lane * 7919 + gen)
    plan = (builder or KINDS[lane % len(KINDS)][1])(lane, gen, rng)

    def scale(items: list[dict[str, Any]]) -> None:
        for item in items:
            for part in (item, item.get("tool") or {}):
                if "seconds" in part:
                    part["seconds"] = round(part["seconds"] * step_scale, 2)
            scale(item.get("then", []))

    scale(plan["script"])
    plan.update(
        board=board,
        log=log,
        interval_s=interval_s,
        timeout_s=timeout_s,
        decision_poll_s=1.0,
        guarded=guarded,
    )
    return plan
