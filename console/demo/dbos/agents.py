"""The demo's DBOS agent workflow: a small interpreter of plans (console/demo/dbos/plans.py).

One registered workflow, ``irq_demo_agent(plan)``, runs any plan, so a worker process only has
to register it once; the plan (the workflow input) says which resources it holds, which
journaled steps it runs and which interrupts it raises. Every step execution appends a line to
the plan's execution log: tests count those lines to prove that journaled steps are replayed,
not re-executed.

Plan shape::

    {"name": "release-train", "board": "/dir", "log": "/file.jsonl" | None,
     "interval_s": 2.0, "timeout_s": 10.0, "decision_poll_s": 1.0,
     "resources": [{"id", "kind", "on_pause", "on_cancel", "detail"}],
     "script": [{"step": "build", "seconds": 3.0},
                {"interrupt": {"title", "action", "args", "args_schema", "allowed",
                               "description", "timeout_s"},
                 "then": [{"step": "deploy", "seconds": 2.0}]}]}
"""

from __future__ import annotations

import time
from typing import Any

from dbos import DBOS

from backend_adapters.dbos.agent import AgentRun, DecisionReply, InterruptExpired
from console.demo.dbos.reservations import ReservationBoard, append_log

WORKFLOW_NAME = "irq_demo_agent"
APP_NAME = "irq-demo"
APP_VERSION = "irq-demo-1"  # pinned: editing this file must not orphan PENDING runs
QUEUE = "irq-demo"


def work(
    wid: str, step: str, seconds: float, log: str | None, args: dict[str, Any]
) -> dict[str, Any]:
    """A step's body: record the execution, then "work" (sleep) for ``seconds``."""
    append_log(log, event="step", wid=wid, step=step, args=args)
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(0.25, left))
    return {"step": step, "done_at": time.time()}


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
    ) as run:
        script = plan.get("script", [])
        for number, item in enumerate(script, start=1):
            run.set_progress(round((number - 1) / max(1, len(script)), 2))
            if "step" in item:
                run.step(item["step"], work, wid, item["step"], item.get("seconds", 1.0), log, {})
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
