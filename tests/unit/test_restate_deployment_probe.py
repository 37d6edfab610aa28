"""A deployment probe runs beside the Restate polls (backend_adapters/restate/
deployment_health.py): a hung deployment (a socket that accepts and never answers) holds its
probe for the whole timeout, and a poll must not wait for it; its ``no_workers`` condition
comes with a later poll, and a poll never waits for a probe under way.

The deployment list is given as Restate's SQL answers it (a stand-in for the one query);
the probe is real HTTP against a real listening socket."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

from backend_adapters.restate.deployment_health import DeploymentHealth
from console.alert_model import AlertKind
from console.model import Run


class Deployments:
    """What ``RestateHttp.query`` answers for ``sys_deployment``."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    async def query(self, sql: str) -> list[dict[str, Any]]:
        assert "sys_deployment" in sql
        return [{"id": "dp_1", "endpoint": self.endpoint, "ty": "http"}]


def _run() -> Run:
    return Run(id="restate:local/inv_1", backend="restate", context="local",
               native_id="inv_1", app_version="dp_1",
               details={"restate_status": "running"})


async def test_a_hung_deployment_never_holds_a_poll() -> None:
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)  # accepts (the kernel's backlog) and never answers
    endpoint = f"http://127.0.0.1:{hung.getsockname()[1]}/"
    health = DeploymentHealth(Deployments(endpoint), context="local",  # type: ignore[arg-type]
                              probe_timeout_s=0.6, cache_s=5.0)
    try:
        # the first poll starts the probe and returns without its answer (awaited, the
        # probe's whole timeout would have passed inside it and the poll found the condition)
        assert await health.conditions([_run()]) == []
        polls = 1
        found: list[object] = []
        deadline = time.monotonic() + 10  # a bound on the wait, not a measure of it
        while not found and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            found = await health.conditions([_run()])
            polls += 1
        assert found, "no no_workers condition for the hung deployment"
        [cond] = found
        assert cond.kind is AlertKind.NO_WORKERS  # type: ignore[attr-defined]
        assert "dp_1" in cond.subject  # type: ignore[attr-defined]
        assert polls > 1  # it came with a later poll, once the probe had timed out
    finally:
        await health.close()
        hung.close()
