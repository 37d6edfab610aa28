"""``no_workers`` on Restate: a registered deployment that has invocations in flight and
does not answer (issue 24).

Restate has no worker registry: a deployment is a URL it calls. A dead service shows up as
invocations backing off with ``last_failure`` "… Connection refused (os error 111)"
(RT0010, measured on 1.7.12), and a hung one only after the inactivity + abort timeouts. So
for each deployment that holds a ``running`` or ``backing-off`` invocation, irq asks the
endpoint itself (``GET {endpoint}discover``, a short timeout, the answer cached a few
seconds): any HTTP answer means a process serves it; a refused or timed-out connection means
nobody does. Lambda deployments (``ty`` lambda) are not probed.

A probe runs beside the polls, not inside one: a hung deployment holds the probe for its whole
timeout, and awaited in the poll that second held every run of the context (a SIGSTOPped
service: observe took 1.1 s every 5 s, and a backing-off window of Restate's shorter than
that was not seen at all, so irq said ``running`` for another retry cycle, 12 s:
benchmarks/restate_hang.py). A poll uses the last answer and starts a new probe when it is
older than ``cache_s``; the first answer of a deployment comes one poll after its probe.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from datetime import datetime

import httpx

from backend_adapters.restate.conventions import BACKEND
from backend_adapters.restate.http_api import RestateHttp
from console.alert_model import AlertKind, Condition
from console.model import Run, utcnow

#: Restate statuses whose invocation needs its deployment now
_IN_FLIGHT = ("running", "backing-off")
_CONNECT_FAILURES = ("connection refused", "error trying to connect", "connection reset",
                     "dns error", "timed out")


@dataclass
class _Probe:
    answers: bool
    error: str
    at: float  # time.monotonic() of the probe


class DeploymentHealth:
    """Probes the deployments invocations wait on; keeps answers ``cache_s`` seconds."""

    def __init__(
        self, http: RestateHttp, *, context: str, probe_timeout_s: float = 1.0,
        cache_s: float = 5.0,
    ) -> None:
        self._http = http
        self._context = context
        self._timeout_s = probe_timeout_s
        self._cache_s = cache_s
        self._probes: dict[str, _Probe] = {}
        self._probing: dict[str, asyncio.Task[_Probe]] = {}  # endpoint -> the probe under way
        self._endpoints: dict[str, tuple[str, str]] = {}  # id -> (endpoint, ty)
        self._endpoints_at = 0.0
        self._down_since: dict[str, datetime] = {}

    async def _deployments(self, wanted: set[str]) -> dict[str, tuple[str, str]]:
        stale = time.monotonic() - self._endpoints_at > self._cache_s
        if stale or not wanted <= self._endpoints.keys():
            rows = await self._http.query("SELECT id, endpoint, ty FROM sys_deployment")
            self._endpoints = {
                str(r.get("id")): (str(r.get("endpoint") or ""), str(r.get("ty") or ""))
                for r in rows
            }
            self._endpoints_at = time.monotonic()
        return self._endpoints

    def _probe(self, endpoint: str) -> _Probe | None:
        """The last answer of ``endpoint`` (None: none yet); a new probe is started beside
        the poll when that answer is older than ``cache_s``."""
        cached = self._probes.get(endpoint)
        task = self._probing.get(endpoint)
        if task is not None and task.done():
            del self._probing[endpoint]
            cached = self._probes[endpoint] = task.result()
        if task is None and (cached is None or time.monotonic() - cached.at >= self._cache_s):
            self._probing[endpoint] = asyncio.create_task(
                self._ask(endpoint), name=f"irq-restate-probe-{endpoint}")
        return cached

    async def _ask(self, endpoint: str) -> _Probe:
        url = endpoint if endpoint.endswith("/") else endpoint + "/"
        try:
            async with httpx.AsyncClient(timeout=self._timeout_s) as client:
                await client.get(url + "discover")
            return _Probe(True, "", time.monotonic())
        except httpx.HTTPError as exc:
            return _Probe(False, f"{type(exc).__name__}: {exc}"[:200], time.monotonic())

    async def close(self) -> None:
        """Cancel the probes under way (the adapter is closing)."""
        for task in self._probing.values():
            task.cancel()
        for task in self._probing.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._probing.clear()

    async def conditions(self, runs: list[Run]) -> list[Condition]:
        """One ``no_workers`` condition per deployment that holds invocations in flight
        and does not answer."""
        waiting: dict[str, list[Run]] = {}
        for run in runs:
            if run.details.get("restate_status") in _IN_FLIGHT and run.app_version:
                waiting.setdefault(run.app_version, []).append(run)
        if not waiting:
            self._down_since.clear()
            return []
        deployments = await self._deployments(set(waiting))
        out: list[Condition] = []
        for dp_id, held in sorted(waiting.items()):
            endpoint, ty = deployments.get(dp_id, ("", ""))
            if not endpoint or ty == "lambda":
                continue
            probe = self._probe(endpoint)
            if probe is None:
                continue  # its first answer comes with a later poll
            if probe.answers:
                self._down_since.pop(dp_id, None)
                continue
            since = self._down_since.setdefault(dp_id, utcnow())
            out.append(self._condition(dp_id, endpoint, held, probe, since))
        for gone in set(self._down_since) - set(waiting):
            self._down_since.pop(gone, None)
        return out

    def _condition(
        self, dp_id: str, endpoint: str, held: list[Run], probe: _Probe, since: datetime
    ) -> Condition:
        failures = [str(r.details.get("last_failure") or "").splitlines()[0]
                    for r in held if r.details.get("last_failure")]
        seen = next((f for f in failures
                     if any(k in f.lower() for k in _CONNECT_FAILURES)), "")
        ids = [r.id for r in held]
        return Condition(
            kind=AlertKind.NO_WORKERS,
            subject=f"{BACKEND}:{self._context}/deployment/{dp_id}",
            detail=(
                f"deployment {dp_id} at {endpoint} does not answer ({probe.error})"
                + (f"; Restate's last attempt: {seen[:200]}" if seen else "")
                + f"; {len(held)} invocation(s) in flight on it"
            ),
            action=f"start the service deployment at {endpoint}",
            backend=BACKEND,
            context=self._context,
            since=since,
            facts={"deployment": dp_id, "endpoint": endpoint, "runs": ids[:20],
                   "probe_error": probe.error},
        )
