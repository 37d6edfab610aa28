"""A DBOS agent whose tool calls go through irq's policy guard (``AgentRun.tool``), for
tests/adapters/test_dbos_policy_guard.py.

    python tests/support/dbos_policy_agent.py --db SYS.db

It serves the queue ``irq-policy`` (enqueue ``policy_agent`` plans with a DBOSClient), prints
``ready`` and runs until SIGTERM. A plan: ``{"record": PATH, "agent", "team", "calls":
[{"tool", "args", "data", "sensitive"}], "fulfil": [rule ids whose obligations the agent
fulfils], "policy_wait_s"}``.

The record file is the agent's own account (JSON lines): a ``side_effect`` line each time a
tool body really ran (with the args it ran with), and an ``outcome`` line per call (``ran``,
``prohibited`` with the winner and explanation, ``rejected`` with the feedback) plus the
obligations the run incurred. Gateway settings come from ``IRQ_AGENT_URL``,
``IRQ_AGENT_TOKEN`` and ``IRQ_AGENT_CONTEXT``.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import signal
import threading
from pathlib import Path
from typing import Any

from dbos import DBOS

from backend_adapters.dbos.agent import (
    AgentRun,
    ToolProhibited,
    ToolRejected,
    agent_config,
    configure_agent,
)

APP_NAME = "irq-policy-agent"
APP_VERSION = "irq-policy-agent-1"
QUEUE = "irq-policy"
WORKFLOW_NAME = "policy_agent"


def append(record: str, entry: dict[str, Any]) -> None:
    with open(record, "a", encoding="utf-8") as out:
        out.write(json.dumps(entry, default=str) + "\n")


def tool_body(record: str, wid: str, tool: str, **args: Any) -> dict[str, Any]:
    """The tool's side effect: a line in the agent's own record."""
    append(record, {"kind": "side_effect", "wid": wid, "tool": tool, "args": args})
    return {"tool": tool, "args": args}


@DBOS.workflow(name=WORKFLOW_NAME)
def policy_agent(plan: dict[str, Any]) -> list[dict[str, Any]]:
    wid = DBOS.workflow_id or ""
    record = str(plan["record"])
    outcomes: list[dict[str, Any]] = []
    with AgentRun(
        name=plan.get("name") or "policy-agent",
        agent=str(plan.get("agent") or "billing-agent"),
        team=str(plan.get("team") or ""),
        interval_s=1.0,
        timeout_s=10.0,
        decision_poll_s=0.5,
        policy_wait_s=float(plan.get("policy_wait_s", 5.0)),
    ) as run:
        for call in plan["calls"]:
            tool = str(call["tool"])
            outcome: dict[str, Any] = {"kind": "outcome", "wid": wid, "tool": tool}
            try:
                run.tool(
                    tool,
                    functools.partial(tool_body, record, wid, tool),
                    dict(call.get("args") or {}),
                    data=tuple(call.get("data") or ()),
                    sensitive=bool(call.get("sensitive")),
                )
                outcome["type"] = "ran"
            except ToolProhibited as refused:
                outcome.update(
                    type="prohibited",
                    winner=refused.decision.winner,
                    explanation=refused.decision.explanation,
                )
            except ToolRejected as rejected:
                outcome.update(type="rejected", feedback=rejected.feedback)
            outcomes.append(outcome)
        for obligation in run.obligations:
            if obligation.rule in (plan.get("fulfil") or ()):
                run.fulfil(obligation.id, f"{obligation.what}: done by the agent")
        obligations = [o.model_dump(mode="json") for o in run.obligations]
        run.step("record outcomes", _record_outcomes, record, outcomes, wid, obligations)
    return outcomes


def _record_outcomes(
    record: str, outcomes: list[dict[str, Any]], wid: str, obligations: list[dict[str, Any]]
) -> None:
    for outcome in outcomes:
        append(record, outcome)
    append(record, {"kind": "obligations", "wid": wid, "obligations": obligations})


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", type=Path, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    url = f"sqlite:///{args.db.resolve()}"
    DBOS(config=agent_config(APP_NAME, url, app_version=APP_VERSION, executor_id="policy-1"))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    configure_agent(url)
    DBOS.launch()
    DBOS.register_queue(QUEUE, polling_interval_sec=0.2)
    print(f"ready (pid {os.getpid()})", flush=True)
    while not stop.wait(1.0):
        pass
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
