"""The Restate part of ``irq demo`` (loaded by ``console.demo.launcher`` when the ``restate``
extra is installed and ``make install`` put the npm ``restate-server`` in ``.venv/restate``).

:func:`demo_extension` gives the launcher three processes, each stopped by its pid:

- ``restate``: ``restate-server`` on free loopback ports, data in ``<demo dir>/restate/``;
- ``rs-svc``: the handlers of ``services.py`` under hypercorn (an agent: it gets the
  demo's agent URL and token, so the report handler's heartbeats reach irq);
- ``rs-feed``: ``python -m console.demo.restate.fleet feeder``: registers the service with
  the server, then keeps one invocation per lane going.

The backend URL it adds to the gateway is ``restate+http://127.0.0.1:ADMIN?ingress=...``.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import random
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from console.demo.launcher import DemoEnvironment, DemoExtension

log = logging.getLogger("irq.demo.restate")

APP = "console.demo.restate.services:app"
#: lane -> (target, body)
LANES: dict[str, tuple[str, dict[str, object]]] = {
    "refund": ("DemoRefunds/refund", {"order": "A-1001", "amount": 120}),
    "clarify": ("DemoSupport/clarify", {}),
    "report": ("DemoReports/nightly", {}),
    "payment": ("DemoPayments/charge", {"amount": 49}),
    "vendor": ("DemoVendors/onboard", {"vendor": "acme-logistics"}),
}
RESTART_DELAY_S = (6.0, 15.0)


def demo_extension(env: DemoEnvironment) -> DemoExtension | None:
    """The server, the service and the feeder; None without restate-server or restate-sdk."""
    if importlib.util.find_spec("restate") is None:
        return None
    from backend_adapters.restate.dev_server import (
        HypercornService,
        RestateServer,
        restate_server_binary,
    )
    from console.demo.launcher import DemoExtension, say
    from console.processes import ChildProcess

    try:
        restate_server_binary()
    except FileNotFoundError as exc:
        say(f"irq demo: no Restate agents: {exc}")
        return None
    server = RestateServer(base_dir=env.demo_dir / "restate")
    service = HypercornService(
        app=APP, cwd=env.demo_dir, log=env.demo_dir / "restate-service.log",
        port=_service_port(env.demo_dir / "restate" / "service-port"),
    )  # fmt: skip
    feeder = ChildProcess(
        name="rs-feed",
        argv=[env.python, "-m", "console.demo.restate.fleet", "feeder", "--admin",
              server.admin_url, "--ingress", server.ingress_url, "--service", service.url],
        log=env.demo_dir / "restate-feeder.log",
    )
    handlers = service.process()
    if env.policy is not None:  # the gateway runs the demo policy: refunds are guarded
        handlers.env = {**handlers.env, "IRQ_DEMO_GUARDED": "1"}
    return DemoExtension(
        name="restate",
        backends=[server.backend_url()],
        servers=[server.process(log=env.demo_dir / "restate-server.log")],
        agents=[handlers, feeder],
    )


def _service_port(remembered: Path) -> int:
    """The handlers' port of the last demo when it is free again, else a new free one
    (remembered): Restate pins each invocation to the deployment (URI) it started on, so the
    invocations a stopped demo left behind resume on the same URI instead of backing off
    forever against a port nobody serves."""
    from console.processes import free_port

    try:
        port = int(remembered.read_text().strip())
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))
    except (OSError, ValueError):
        port = free_port()
        remembered.parent.mkdir(parents=True, exist_ok=True)
        remembered.write_text(f"{port}\n")
    return port


def _register(http: httpx.Client, admin: str, service: str) -> None:
    while True:
        try:
            reply = http.post(f"{admin}/deployments", json={"uri": service, "force": True})
            if reply.status_code < 300:
                log.info("registered %s", service)
                _kill_stranded(http, admin, str(reply.json().get("id") or ""))
                return
            log.warning("register %s: %s %s", service, reply.status_code, reply.text[:200])
        except httpx.HTTPError as exc:
            log.warning("register %s: %s", service, exc)
        time.sleep(1.0)


def _kill_stranded(http: httpx.Client, admin: str, current: str) -> None:
    """Kill the demo invocations a stopped demo left pinned to another deployment (a port
    nobody serves any more: they would back off forever and hold their lane)."""
    if not current:
        return
    reply = http.post(
        f"{admin}/query",
        json={"query": "SELECT id, pinned_deployment_id FROM sys_invocation "
                       "WHERE status <> 'completed' AND pinned_deployment_id IS NOT NULL"},
        headers={"accept": "application/json"},
    )  # fmt: skip
    reply.raise_for_status()
    for row in reply.json().get("rows", []):
        if row.get("pinned_deployment_id") not in (None, current):
            http.patch(f"{admin}/invocations/{row['id']}/kill")
            log.info("killed %s: pinned to a deployment no longer served", row["id"])


def _live_targets(http: httpx.Client, admin: str) -> set[str]:
    reply = http.post(
        f"{admin}/query",
        json={"query": "SELECT target FROM sys_invocation WHERE status <> 'completed'"},
        headers={"accept": "application/json"},
    )
    reply.raise_for_status()
    return {str(row.get("target")) for row in reply.json().get("rows", [])}


def feed(admin: str, ingress: str, service: str, *, once: bool = False) -> None:
    rng = random.Random(os.getpid())
    due: dict[str, float] = {}
    fed: set[str] = set()
    with httpx.Client(timeout=10) as http:
        _register(http, admin, service)
        while True:
            try:
                live = _live_targets(http, admin)
                now = time.monotonic()
                for lane, (target, body) in LANES.items():
                    if target in live:
                        due.pop(lane, None)
                        continue
                    if lane in fed and lane not in due:
                        due[lane] = now + rng.uniform(*RESTART_DELAY_S)
                    if now < due.get(lane, now):
                        continue
                    sent = http.post(f"{ingress}/{target}/send", json=body).json()
                    due.pop(lane, None)
                    fed.add(lane)
                    log.info("lane %s: started %s", lane, sent.get("invocationId"))
            except (httpx.HTTPError, ValueError) as exc:
                log.warning("restate: %s", exc)
            if once:
                return
            time.sleep(2.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="irq demo: Restate lanes")
    sub = parser.add_subparsers(dest="command", required=True)
    feeder = sub.add_parser("feeder", help="register the service, keep one invocation per lane")
    feeder.add_argument("--admin", required=True)
    feeder.add_argument("--ingress", required=True)
    feeder.add_argument("--service", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per poll otherwise
    feed(args.admin, args.ingress, args.service)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
