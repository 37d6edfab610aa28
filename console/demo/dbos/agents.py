"""The demo's DBOS agent workflow: a small interpreter of plans (console/demo/dbos/plans.py).

One registered workflow, ``irq_demo_agent(plan)``, runs any plan, so a worker process only has
to register it once; the plan (the workflow input) says which resources it holds, which
journaled steps it runs, which tools it calls and which interrupts it raises. Every step
execution appends a line to the plan's execution log: tests count those lines to prove that
journaled steps are replayed, not re-executed (and that a refused tool never ran).

Plan shape::

    {"name": "release-train", "agent": "deploy-agent", "team": "platform",
     "guarded": true, "board": "/dir", "log": "/file.jsonl" | None,
     "interval_s": 2.0, "timeout_s": 10.0, "decision_poll_s": 1.0,
     "resources": [{"id", "kind", "on_pause", "on_cancel", "detail"}],
     "script": [{"step": "build", "seconds": 3.0},
                {"tool": {"name", "step", "seconds", "args", "title", "args_schema", "data",
                          "sensitive", "ask": {"description", "allowed", "timeout_s"} | None},
                 "then": [{"step": "verify", "seconds": 2.0}]},
                {"interrupt": {"title", "action", "args", "args_schema", "allowed",
                               "description", "timeout_s"},
                 "then": [{"step": "deploy", "seconds": 2.0}]}]}

A ``step`` with ``creep`` moves the run's progress a little at a time while it works (a slow
call that still gets somewhere); without it, progress moves only between items.

A ``tool`` item with ``guarded`` goes through the policy guard (``AgentRun.tool``): the gateway's
policy permits it (it runs), prohibits it (it never runs; recorded) or asks for an approval (an
interrupt naming the rule; it runs once on approve or edit, never on reject), and obligations
open after it ran. Without ``guarded`` its ``ask``, if any, is raised as a plain interrupt first.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from dbos import DBOS

from backend_adapters.dbos.agent import AgentRun, DecisionReply, InterruptExpired
from backend_adapters.policy_guard import ToolProhibited, ToolRejected
from console.demo.dbos.reservations import ReservationBoard, append_log

WORKFLOW_NAME = "irq_demo_agent"
APP_NAME = "irq-demo"
APP_VERSION = "irq-demo-1"  # pinned: editing this file must not orphan PENDING runs
QUEUE = "irq-demo"


def work(
    wid: str,
    step: str,
    seconds: float,
    log: str | None,
    args: dict[str, Any],
    done: Callable[[float], None] | None = None,
) -> dict[str, Any]:
    """A step's body: record the execution, then "work" (sleep) for ``seconds``, telling
    ``done`` (if any) which fraction of the work is behind it."""
    append_log(log, event="step", wid=wid, step=step, args=args)
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(0.25, left))
        if done is not None:
            done(1.0 - max(0.0, deadline - time.monotonic()) / max(seconds, 0.001))
    return {"step": step, "done_at": time.time()}


def _creep(run: AgentRun, start: float, end: float, fraction: float) -> None:
    """Progress from ``start`` to ``end`` as a step's work gets done (3 decimals: a slow step
    still moves between two heartbeats)."""
    run.set_progress(round(start + (end - start) * fraction, 3))


def use_tool(
    wid: str, step: str, seconds: float, log: str | None, /, **args: Any
) -> dict[str, Any]:
    """A tool's body: the journaled step ``step`` with the arguments it was finally called with
    (an operator's edit included)."""
    return {**work(wid, step, seconds, log, args), "args": args}


def note_decision(wid: str, log: str | None, reply: dict[str, Any]) -> dict[str, Any]:
    append_log(log, event="decision", wid=wid, **reply)
    return reply


@DBOS.workflow(name=WORKFLOW_NAME)
def irq_demo_agent(plan: dict[str, Any]) -> dict[str, Any]:
    wid = DBOS.workflow_id or ""
    log = plan.get("log")
    board = ReservationBoard(plan["board"], log=log)
    resources = [
        board.resource(
            r["id"],
            kind=r.get("kind", "resource"),
            owner=wid,
            on_pause=r.get("on_pause", "keep"),
            on_cancel=r.get("on_cancel", "release"),
            detail=r.get("detail", ""),
        )
        for r in plan.get("resources", [])
    ]
    decisions: list[dict[str, Any]] = []
    with AgentRun(
        name=plan.get("name"),
        resources=resources,
        interval_s=float(plan.get("interval_s", 2.0)),
        timeout_s=plan.get("timeout_s", 10.0),
        decision_poll_s=float(plan.get("decision_poll_s", 2.0)),
        agent=str(plan.get("agent") or ""),
        team=str(plan.get("team") or ""),
    ) as run:
        script = plan.get("script", [])
        for number, item in enumerate(script, start=1):
            start, end = (number - 1) / max(1, len(script)), number / max(1, len(script))
            run.set_progress(round(start, 2))
            if "step" in item:
                creep = functools.partial(_creep, run, start, end) if item.get("creep") else None
                seconds = item.get("seconds", 1.0)
                run.step(item["step"], work, wid, item["step"], seconds, log, {}, creep)
            elif "tool" in item and plan.get("guarded"):
                decisions.append(_guarded_tool(run, wid, log, item))
            elif "tool" in item:
                decisions.append(_unguarded_tool(run, wid, log, item))
            elif "interrupt" in item:
                decisions.append(_interrupt(run, wid, log, item))
        run.set_progress(1.0)
    return {"decisions": decisions}


def _interrupt(run: AgentRun, wid: str, log: str | None, item: dict[str, Any]) -> dict[str, Any]:
    spec = item["interrupt"]
    try:
        reply: DecisionReply | None = run.interrupt(
            spec["title"],
            action=spec.get("action", ""),
            args=spec.get("args") or {},
            args_schema=spec.get("args_schema"),
            description=spec.get("description", ""),
            allowed=tuple(spec.get("allowed", ("approve", "reject"))),
            timeout_s=spec.get("timeout_s"),
        )
    except InterruptExpired as expired:
        reply = None
        iid = expired.interrupt_id
    record = (
        {
            "interrupt_id": reply.interrupt_id,
            "type": reply.type,
            "by": reply.by,
            "args": reply.args,
            "feedback": reply.feedback,
            "response": reply.response,
            "command_id": reply.command_id,
        }
        if reply
        else {"interrupt_id": iid, "type": "expired"}
    )
    run.step(f"record decision ({record['type']})", note_decision, wid, log, record)
    if reply is not None and reply.type in ("approve", "edit", "respond"):
        for then in item.get("then", []):
            seconds = then.get("seconds", 1.0)
            run.step(then["step"], work, wid, then["step"], seconds, log, reply.args)
    return record


def _guarded_tool(run: AgentRun, wid: str, log: str | None, item: dict[str, Any]) -> dict[str, Any]:
    """The tool call through the policy guard; the outcome is journaled and logged."""
    spec = item["tool"]
    body = functools.partial(use_tool, wid, spec["step"], spec.get("seconds", 1.0), log)
    record: dict[str, Any] = {"tool": spec["name"]}
    try:
        result = run.tool(
            spec["name"],
            body,
            dict(spec.get("args") or {}),
            data=tuple(spec.get("data") or ()),
            sensitive=bool(spec.get("sensitive")),
            args_schema=spec.get("args_schema"),
            title=spec.get("title"),
        )
    except ToolProhibited as refused:
        record.update(type="prohibited", rule=refused.decision.winner)
    except ToolRejected as rejected:
        record.update(type="rejected", feedback=rejected.feedback)
    else:
        record.update(type="ran", args=result.get("args"))
    run.step(f"record {spec['name']} ({record['type']})", note_decision, wid, log, record)
    if record["type"] == "ran":
        for then in item.get("then", []):
            seconds = then.get("seconds", 1.0)
            run.step(then["step"], work, wid, then["step"], seconds, log, record["args"] or {})
    return record


def _unguarded_tool(
    run: AgentRun, wid: str, log: str | None, item: dict[str, Any]
) -> dict[str, Any]:
    """Without the guard: the tool's ``ask`` (if any) as a plain interrupt, then the tool."""
    spec = item["tool"]
    ask = spec.get("ask")
    if not ask:
        args = dict(spec.get("args") or {})
        run.step(spec["step"], work, wid, spec["step"], spec.get("seconds", 1.0), log, args)
        for then in item.get("then", []):
            run.step(then["step"], work, wid, then["step"], then.get("seconds", 1.0), log, args)
        return {"tool": spec["name"], "type": "ran", "args": args}
    interrupt = {
        "title": spec["title"],
        "description": ask.get("description", ""),
        "action": spec["name"],
        "args": spec.get("args") or {},
        "args_schema": spec.get("args_schema"),
        "allowed": ask.get("allowed", ["approve", "reject"]),
        "timeout_s": ask.get("timeout_s"),
    }
    then = [{"step": spec["step"], "seconds": spec.get("seconds", 1.0)}, *item.get("then", [])]
    return _interrupt(run, wid, log, {"interrupt": interrupt, "then": then})
