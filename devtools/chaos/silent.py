"""Connections that never say hello, and half-open TCP, against a live ``irq serve``.

Three kinds of squatter, opened together: websockets that finished the handshake and never
send ``hello`` (the gateway closes them with 1008 after its hello timeout), TCP connections
that never send a byte, and TCP connections stuck halfway through the HTTP upgrade request.
While they are held, legitimate clients connect one after another with
:class:`console.client.GatewayClient` (open, hello, snapshot) and ping; their connect+snapshot
times are measured, and compared with the same clients on the idle gateway before.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.client import GatewayClient
from devtools.chaos.fleet import GatewayProcess, make_tokens


@dataclass
class SilentReport:
    squatters: Counter[str] = field(default_factory=Counter)  # opened, by kind
    squatters_closed_by_gateway: Counter[str] = field(default_factory=Counter)
    legit_connects: int = 0
    legit_failures: int = 0
    baseline_ms: list[float] = field(default_factory=list)
    under_load_ms: list[float] = field(default_factory=list)
    crashes: int = 0

    def as_dict(self) -> dict[str, Any]:
        def p(values: list[float], q: float) -> float:
            if not values:
                return 0.0
            ordered = sorted(values)
            return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

        return {
            "silent_connections": sum(self.squatters.values()),
            "silent_by_kind": dict(self.squatters),
            "silent_closed_by_gateway": dict(self.squatters_closed_by_gateway),
            "legit_connects": self.legit_connects,
            "legit_failures": self.legit_failures,
            "legit_connect_ms_idle_p50": round(statistics.median(self.baseline_ms), 1)
            if self.baseline_ms else 0.0,
            "legit_connect_ms_p50": p(self.under_load_ms, 0.5),
            "legit_connect_ms_p95": p(self.under_load_ms, 0.95),
            "legit_connect_ms_max": round(max(self.under_load_ms, default=0.0), 1),
            "silent_crashes": self.crashes,
        }


async def _legit(url: str, token: str, report: SilentReport, into: list[float]) -> None:
    began = time.monotonic()
    try:
        async with GatewayClient(url, token, subscribe=False, open_timeout=20,
                                 request_timeout=20) as client:
            into.append((time.monotonic() - began) * 1000)
            await client.ping()
        report.legit_connects += 1
    except Exception:
        report.legit_failures += 1


async def _ws_squatter(url: str, token: str) -> Any:
    from websockets.asyncio.client import connect

    return await connect(url, additional_headers={"Authorization": f"Bearer {token}"},
                         open_timeout=30, ping_interval=None)


async def _tcp_squatter(port: int, partial: bool) -> asyncio.StreamWriter:
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    if partial:
        writer.write(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                     .encode())
        await writer.drain()
    writer._chaos_reader = _reader  # type: ignore[attr-defined]  # keep it referenced
    return writer


async def run_silent(workdir: Path, *, squatters: int = 500, legit: int = 30,
                     hold_s: float = 14.0) -> SilentReport:
    home = workdir / "silent-home"
    tokens = make_tokens(home, clients=2)
    gw = GatewayProcess(home, [f"dbos+sqlite:///{workdir}/no-db/a.db?context=local&poll=5"],
                        name="silent-gw")
    report = SilentReport()
    gw.start()
    url, token = gw.url, tokens["operator"][0]
    wss: list[Any] = []
    writers: list[asyncio.StreamWriter] = []
    try:
        for _ in range(5):
            await _legit(url, token, report, report.baseline_ms)
        n_ws = squatters * 3 // 5
        n_tcp = (squatters - n_ws) // 2
        n_partial = squatters - n_ws - n_tcp
        results = await asyncio.gather(
            *(_ws_squatter(url, tokens["operator"][1]) for _ in range(n_ws)),
            return_exceptions=True)
        wss = [w for w in results if not isinstance(w, BaseException)]
        report.squatters["ws_no_hello"] = len(wss)
        for i in range(n_tcp + n_partial):
            with contextlib.suppress(OSError):
                writers.append(await _tcp_squatter(gw.port, partial=i >= n_tcp))
        report.squatters["tcp_silent"] = min(n_tcp, len(writers))
        report.squatters["tcp_partial_http"] = max(0, len(writers) - n_tcp)
        began = time.monotonic()
        spacing = hold_s / max(1, legit)
        for _ in range(legit):
            await _legit(url, token, report, report.under_load_ms)
            await asyncio.sleep(max(0.0, spacing - 0.0))
            if time.monotonic() - began > hold_s + 30:
                break
        # what the gateway did with them meanwhile (hello timeout, handshake timeout)
        report.squatters_closed_by_gateway["ws_no_hello"] = sum(
            1 for w in wss if w.close_code is not None)
        closed_tcp = 0
        for w in writers:
            reader = w._chaos_reader  # type: ignore[attr-defined]
            with contextlib.suppress(Exception):
                await asyncio.wait_for(reader.read(), 0.05)  # returns only at EOF
                closed_tcp += 1
        report.squatters_closed_by_gateway["tcp"] = closed_tcp
    finally:
        for w in wss:
            with contextlib.suppress(Exception):
                await w.close()
        for wr in writers:
            with contextlib.suppress(Exception):
                wr.close()
        report.crashes = 0 if gw.alive() else 1
        gw.stop()
    return report
