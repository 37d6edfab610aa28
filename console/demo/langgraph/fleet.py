"""The LangGraph part of ``irq demo`` (loaded by ``console.demo.launcher`` when the
``langgraph`` extra is installed).

:func:`demo_extension` gives the launcher two processes, both stopped by their pid:

- ``langgraph``: ``langgraph dev`` (``langgraph-cli[inmem]``) on a free loopback port, in
  ``<demo dir>/langgraph/`` (its in-memory runtime keeps the threads there between demos),
  serving the plain graphs in ``graphs.py``;
- ``lg-feed``: ``python -m console.demo.langgraph.fleet feeder --url ...``: keeps one
  thread of every lane going (waiting for a decision, or running), starting the next one a
  little after the operator decided or cancelled the last.

The backend URL it adds to the gateway is ``langgraph+http://127.0.0.1:PORT``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import random
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from console.demo.launcher import DemoEnvironment, DemoExtension

log = logging.getLogger("irq.demo.langgraph")

GRAPHS_FILE = Path(__file__).with_name("graphs.py")
GRAPHS = ("expenses", "ops_agent", "ask_user", "report", "status_update")
#: metadata key of the demo's threads: which lane a thread belongs to
LANE_KEY = "irq_demo_lane"
#: seconds between a lane's thread finishing and the next one starting
RESTART_DELAY_S = (6.0, 15.0)

OPS_CALLS = {
    "calls": [
        {"name": "restart_service", "args": {"service": "checkout", "region": "eu-west-1"}},
        {"name": "page_oncall", "args": {"team": "payments", "message": "checkout restarted"}},
    ]
}
#: lane -> (graph, input)
LANES: dict[str, tuple[str, dict[str, Any]]] = {
    "expenses": ("expenses", {}),
    "ops": ("ops_agent", {"messages": [{"role": "user", "content": json.dumps(OPS_CALLS)}]}),
    "ask-user": ("ask_user", {}),
    "report": ("report", {}),
    "status-update": ("status_update", {"incident": "INC-4711"}),
}
#: lanes whose graph stops at a static breakpoint: a thread stopped there is ``interrupted``
#: with no interrupt value, like one irq paused (breakpoints.py), and is waiting, not done
BREAKPOINT_LANES = frozenset({"status-update"})


def demo_extension(env: DemoEnvironment) -> DemoExtension | None:
    """The Agent Server and the feeder; None without the langgraph CLI."""
    if importlib.util.find_spec("langgraph_api") is None:
        return None
    from backend_adapters.langgraph.dev_server import AgentServer, write_config
    from console.demo.launcher import DemoExtension, say
    from console.processes import ChildProcess

    workdir = env.demo_dir / "langgraph"
    write_config(workdir, {name: f"{GRAPHS_FILE}:{name}" for name in GRAPHS})
    agent_server = AgentServer(workdir)
    try:
        argv = agent_server.argv()
    except FileNotFoundError as exc:
        say(f"irq demo: no LangGraph agents: {exc}")
        return None
    from backend_adapters.langgraph.dev_server import OFFLINE_ENV

    server = ChildProcess(
        name="langgraph",
        argv=argv,
        log=env.demo_dir / "langgraph-server.log",
        env=dict(OFFLINE_ENV),
        ready=agent_server.answers,
        cwd=workdir,
    )
    feeder = ChildProcess(
        name="lg-feed",
        argv=[env.python, "-m", "console.demo.langgraph.fleet", "feeder", "--url",
              agent_server.url],  # fmt: skip
        log=env.demo_dir / "langgraph-feeder.log",
    )
    return DemoExtension(
        name="langgraph",
        backends=[agent_server.backend_url()],
        servers=[server],
        agents=[feeder],
    )


def _live_lanes(http: httpx.Client) -> set[str]:
    live: set[str] = set()
    for status in ("interrupted", "busy"):
        threads = http.post(
            "/threads/search",
            json={"status": status, "limit": 1000, "select": ["thread_id", "metadata",
                                                                 "interrupts"]},
        ).json()
        for thread in threads:
            meta = thread.get("metadata") or {}
            lane = meta.get(LANE_KEY)
            stopped = status == "interrupted" and not thread.get("interrupts")
            intent = (meta.get("irq_intent") or {}).get("action")
            if lane and not stopped:
                live.add(str(lane))
            elif lane and stopped and intent == "pause":
                live.add(str(lane))  # paused by irq: it stays, the lane waits
            elif lane in BREAKPOINT_LANES and stopped and intent != "cancel":
                live.add(str(lane))  # at its breakpoint: waiting for a person
    return live


def feed(url: str, *, once: bool = False) -> None:
    """Keep one thread per lane waiting or running; start the next after a short delay."""
    rng = random.Random(os.getpid())
    due: dict[str, float] = {}  # lane -> when its next thread starts
    fed: set[str] = set()  # lanes this feeder started a thread for
    with httpx.Client(base_url=url, timeout=10) as http:
        while True:
            try:
                live = _live_lanes(http)
                now = time.monotonic()
                for lane, (graph, payload) in LANES.items():
                    if lane in live:
                        due.pop(lane, None)
                        continue
                    if lane in fed and lane not in due:  # just finished: a short break
                        due[lane] = now + rng.uniform(*RESTART_DELAY_S)
                    if now < due.get(lane, now):
                        continue
                    thread = http.post("/threads", json={"metadata": {LANE_KEY: lane}}).json()
                    http.post(
                        f"/threads/{thread['thread_id']}/runs",
                        json={"assistant_id": graph, "input": payload},
                    )
                    due.pop(lane, None)
                    fed.add(lane)
                    live.add(lane)
                    log.info("lane %s: started thread %s", lane, thread["thread_id"])
            except (httpx.HTTPError, ValueError) as exc:
                log.warning("agent server: %s", exc)
            if once:
                return
            time.sleep(2.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="irq demo: LangGraph lanes")
    sub = parser.add_subparsers(dest="command", required=True)
    feeder = sub.add_parser("feeder", help="keep one thread per lane going")
    feeder.add_argument("--url", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    feed(args.url)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
