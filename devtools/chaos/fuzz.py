"""Fuzzed frames against a live ``irq serve``, on ``/`` (clients) and ``/agent`` (agents).

Kinds of frame (:func:`fuzz_frame`): random bytes (binary frames), random text, deeply nested
JSON, oversized frames (past ``max_frame_bytes``), invalid UTF-8 (in binary frames; in a text
frame RFC 6455 makes the websockets layer close that one connection with 1007, so those go on
connections of their own and are counted apart), huge integers, non-finite numbers, JSON that
is not an object, unknown types, and valid-looking frames of every type with fields of the
wrong type. After every 500 frames a connection sends a ``ping`` and waits for its ``pong``.

What is counted: frames sent, answers by error code, error frames without a code or a message,
unanswered pings, connections the gateway closed (by close code), whether the gateway process
survived, its RSS before, after a warm-up, at the end; a bystander client that only pings
(once a second) must never be closed or left unanswered.

Clients and agents are paced under the gateway's budgets (GatewaySettings: frames per
connection and per identity, a large heartbeats frame costing one per 2 KiB), so frames reach
the parser instead of the rate limiter.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import string
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.gateway.agent_channel import frame_cost
from console.gateway.protocol import MAX_FRAME_BYTES
from console.gateway.settings import GatewaySettings
from devtools.chaos.fleet import GatewayProcess, make_tokens

PING_EVERY = 500
PING_REFILL_S = 0.05  # 5 frames at 100/s per connection, 15 at 300/s per identity
KNOWN_CODES = {"malformed", "unknown_type", "invalid", "too_large", "expected_hello",
               "unsupported_protocol", "not_found", "unknown_backend", "rate_limited",
               "out_of_scope", "bound_to_other", "internal"}

CLIENT_TEMPLATES: list[dict[str, Any]] = [
    {"type": "command", "id": "k", "action": "pause", "targets": ["dbos:local/wf-1"],
     "reason": "r", "dry_run": True},
    {"type": "command", "id": "k", "action": "decide", "targets": ["dbos:local/wf-1#i1"],
     "decision": {"kind": "edit", "args": {"env": "staging"}}},
    {"type": "query", "id": "q", "what": "run", "run_id": "dbos:local/wf-1"},
    {"type": "query", "id": "q", "what": "audit", "limit": 10, "target_prefix": "dbos"},
    {"type": "query", "id": "q", "what": "plan", "action": "cancel", "targets": ["x"]},
    {"type": "query", "id": "q", "what": "policy_check", "invocation": {"tool": "t"}},
    {"type": "focus", "run_ids": ["dbos:local/wf-1"]},
    {"type": "ping", "id": "p"},
    {"type": "hello", "protocol": 1, "since": 3, "epoch": "e", "subscribe": False},
]
AGENT_TEMPLATES: list[dict[str, Any]] = [
    {"type": "heartbeat", "backend": "dbos", "context": "local", "native_id": "wf-1",
     "seq": 1, "at": "2026-11-29T10:00:00Z", "progress": 0.4, "details": {"step": "f"},
     "resources": [{"id": "gpu-0", "kind": "gpu", "on_pause": "keep",
                    "on_cancel": "release", "state": "held"}],
     "interval_s": 2.0, "timeout_s": 10.0, "in_flight_step": "f", "phase": "running"},
    {"type": "heartbeats", "beats": [{"backend": "dbos", "native_id": "wf-2", "seq": 2,
                                      "at": "2026-11-29T10:00:00Z"}]},
    {"type": "policy_event", "event": "decision", "backend": "dbos", "context": "local",
     "native_id": "wf-1", "call_id": "7", "at": "2026-11-29T10:00:00Z", "tool": "refund",
     "decision": {"outcome": "permit"}},
    {"type": "policy_event", "event": "obligation_fulfilled", "backend": "dbos",
     "context": "local", "native_id": "wf-1", "id": "dbos:local/wf-1#7/x", "note": "n"},
    {"type": "ping", "id": "p"},
]


def _wrong_value(rng: random.Random) -> Any:
    return rng.choice([
        None, True, -1, 0, 2**70, 1.5, -1e308, "", "x" * rng.randint(1, 3000), [], [1, "a"],
        {}, {"nested": {"deeper": [None]}}, "1e999", "NaN", "\u0000\ud7ff\uffff",
        ["dbos:local/x"] * rng.randint(1, 1500), "2099-01-01T00:00:00Z",
    ])


def _mutated(rng: random.Random, template: dict[str, Any]) -> dict[str, Any]:
    frame: dict[str, Any] = json.loads(json.dumps(template))
    for _ in range(rng.randint(1, 3)):
        key = rng.choice(list(frame))
        roll = rng.random()
        if roll < 0.7:
            frame[key] = _wrong_value(rng)
        elif roll < 0.85:
            del frame[key]
        else:
            frame["".join(rng.choices(string.ascii_lowercase, k=6))] = _wrong_value(rng)
        if not frame:
            break
    if rng.random() < 0.5 and "id" in frame and not isinstance(frame["id"], str):
        frame["id"] = f"f{rng.randint(0, 10**9)}"  # an answer we can match, half the time
    if rng.random() < 0.3:  # a heartbeat with a fresh run id: held as an unknown beat
        frame["native_id"] = f"fz-{rng.randint(0, 10**9)}"
    return frame


def _nested(rng: random.Random) -> str:
    depth = rng.choice([65, 100, 1000, 20_000])
    opener, closer = rng.choice([("[", "]"), ('{"a":', "}")])
    return '{"type": "ping", "id": "n", "n": ' + opener * depth + "1" + closer * depth + "}"


def fuzz_frame(rng: random.Random, channel: str, *, allow_large: bool) -> str | bytes:
    """One fuzzed frame: ``str`` goes out as a text frame, ``bytes`` as a binary frame."""
    templates = CLIENT_TEMPLATES if channel == "/" else AGENT_TEMPLATES
    roll = rng.random()
    if roll < 0.12:
        return rng.randbytes(rng.randint(0, 2048))
    if roll < 0.20:
        return "".join(rng.choices(string.printable, k=rng.randint(0, 512)))
    if roll < 0.26:
        return _nested(rng)
    if roll < 0.32:  # invalid UTF-8 inside otherwise fine JSON, in a binary frame
        return b'{"type": "ping", "id": "u", "x": "' + rng.randbytes(8) + b'\xff\xfe"}'
    if roll < 0.37:
        return rng.choice(['{"type": "ping", "id": "b", "n": ' + "9" * 5000 + "}",
                           '{"type": "ping", "n": NaN}', '{"type": "ping", "n": 1e999}',
                           '{"type": "ping", "n": -Infinity}'])
    if roll < 0.42:
        return json.dumps(rng.choice([[1, 2], "text", 42, None, True, [{"type": "ping"}]]))
    if roll < 0.46:
        return json.dumps({"type": rng.choice(["", "hello2", "ping ", "PING", "x" * 300, 5]),
                           "id": "t"})
    if allow_large and roll < 0.4605:  # rare: each costs a megabyte or more on the wire
        return json.dumps({"type": "ping", "id": "big",
                           "pad": "x" * rng.randint(MAX_FRAME_BYTES, 3 * MAX_FRAME_BYTES)})
    return json.dumps(_mutated(rng, rng.choice(templates)), ensure_ascii=rng.random() < 0.5)


@dataclass
class FuzzReport:
    frames: int = 0
    by_channel: Counter[str] = field(default_factory=Counter)
    answers: Counter[str] = field(default_factory=Counter)  # error codes and answer types
    unclear_errors: int = 0  # error frames without a known code or without a message
    pings: int = 0
    unanswered_pings: int = 0
    ping_ms_max: float = 0.0
    closed: Counter[str] = field(default_factory=Counter)  # unexpected closes, by code
    expected_closes: Counter[str] = field(default_factory=Counter)  # 1009 / 1007 probes
    bystander_pings: int = 0
    bystander_unanswered: int = 0
    bystander_closed: bool = False
    crashes: int = 0
    rss_before_kb: int = 0
    rss_warm_kb: int = 0
    rss_after_kb: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "fuzz_frames": self.frames, "fuzz_frames_by_path": dict(self.by_channel),
            "fuzz_answers": dict(self.answers), "fuzz_unclear_errors": self.unclear_errors,
            "fuzz_pings": self.pings, "unanswered_pings": self.unanswered_pings,
            "fuzz_ping_ms_max": round(self.ping_ms_max, 1),
            "fuzz_unexpected_closes": dict(self.closed),
            "fuzz_expected_closes": dict(self.expected_closes),
            "bystander_pings": self.bystander_pings,
            "bystander_unanswered": self.bystander_unanswered,
            "bystander_closed": self.bystander_closed,
            "crashes": self.crashes, "rss_before_kb": self.rss_before_kb,
            "rss_warm_kb": self.rss_warm_kb, "rss_after_kb": self.rss_after_kb,
            "rss_growth_after_warmup_kb": self.rss_after_kb - self.rss_warm_kb,
            "fuzz_seconds": round(self.seconds, 1),
        }


def split(total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` near-equal counts that add up to it."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


class _Conn:
    """One fuzzing connection: a reader task counts answers and resolves pings."""

    def __init__(self, ws: Any, report: FuzzReport) -> None:
        self.ws, self.report = ws, report
        self.pongs: dict[str, asyncio.Future[None]] = {}
        self.close_code: int | None = None
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            async for raw in self.ws:
                frame = json.loads(raw)
                kind = frame.get("type")
                if kind == "pong":
                    fut = self.pongs.pop(str(frame.get("id")), None)
                    if fut is not None and not fut.done():
                        fut.set_result(None)
                    continue
                if kind == "error":
                    code = frame.get("code")
                    self.report.answers[str(code)] += 1
                    if code not in KNOWN_CODES or not frame.get("message"):
                        self.report.unclear_errors += 1
                    if code == "rate_limited" and frame.get("ref") in self.pongs:
                        self.pongs.pop(frame["ref"]).set_exception(RuntimeError("limited"))
                else:
                    self.report.answers[str(kind)] += 1
        except ConnectionClosed as exc:
            self.close_code = exc.rcvd.code if exc.rcvd else 1006
        finally:
            for fut in self.pongs.values():
                if not fut.done():
                    fut.set_exception(RuntimeError("closed"))

    async def ping(self, pid: str, timeout_s: float = 20.0) -> float | None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.pongs[pid] = fut
        began = time.monotonic()
        try:
            await self.ws.send(json.dumps({"type": "ping", "id": pid}))
            await asyncio.wait_for(fut, timeout_s)
        except Exception:
            self.pongs.pop(pid, None)
            return None
        return time.monotonic() - began

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close()
        self.reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.reader


async def _open(url: str, token: str, report: FuzzReport, *, hello: bool = True) -> _Conn:
    from websockets.asyncio.client import connect

    ws = await connect(url, additional_headers={"Authorization": f"Bearer {token}"},
                       max_size=None, open_timeout=30, ping_interval=None, compression=None)
    if hello:
        await ws.send(json.dumps({"type": "hello", "protocol": 1, "client": "chaos-fuzz",
                                  "subscribe": False}))
        if url.endswith("/agent"):
            pass  # the agent channel answers a hello with a policy frame (counted)
        else:  # welcome, snapshot
            for _ in range(2):
                await asyncio.wait_for(ws.recv(), 30)
    return _Conn(ws, report)


async def _fuzz_connection(conn: _Conn, channel: str, frames: int, rng: random.Random,
                           report: FuzzReport, rate_per_s: float, tag: str) -> None:
    """``frames`` fuzzed frames in bursts of PING_EVERY, each followed by a ping; paced to 90 %
    of ``rate_per_s``, what this connection may spend of the gateway's budgets (by what each
    frame costs), so frames reach the parser, not the rate limiter."""
    sent = 0
    n = 0
    while sent < frames and conn.close_code is None:
        began = time.monotonic()
        batch = min(PING_EVERY, frames - sent)
        spent = 1.0  # the ping
        for _ in range(batch):
            frame = fuzz_frame(rng, channel, allow_large=True)
            try:
                await conn.ws.send(frame)
            except Exception:
                break
            # a client frame costs one; an agent frame what the gateway charges for it
            spent += frame_cost(frame) if channel == "/agent" else 1.0
            sent += 1
            report.frames += 1
            report.by_channel[channel] += 1
        n += 1
        report.pings += 1
        # the ping comes after the burst: let the buckets refill what the burst spent first
        # (and a few frames' worth more), or a gateway that parsed it quickly answers the ping
        # rate_limited (the parser got fast enough for that on /, then on /agent)
        await asyncio.sleep(max(PING_REFILL_S, spent / (0.9 * rate_per_s)
                                - (time.monotonic() - began)))
        rtt = await conn.ping(f"{tag}-{n}")
        if rtt is None:
            report.unanswered_pings += 1
        else:
            report.ping_ms_max = max(report.ping_ms_max, rtt * 1000)
    await asyncio.sleep(0.5)  # the last answers
    if conn.close_code is not None:
        report.closed[str(conn.close_code)] += 1


async def _bystander(url: str, token: str, report: FuzzReport, stop: asyncio.Event) -> None:
    conn = await _open(url, token, report)
    n = 0
    try:
        while not stop.is_set():
            n += 1
            report.bystander_pings += 1
            if await conn.ping(f"by-{n}", timeout_s=10) is None:
                report.bystander_unanswered += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
        report.bystander_closed = conn.close_code is not None
    finally:
        await conn.close()


async def _probe_close(url: str, token: str, frame: str | bytes, text: bool,
                       report: FuzzReport, label: str) -> None:
    """A frame that ends its own connection (past 16 MiB: 1009; invalid UTF-8 in a text
    frame: 1007); the code is recorded; no other connection may notice."""
    conn = await _open(url, token, report)
    try:
        await conn.ws.send(frame, text=text)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(conn.reader), 15)
    except Exception:
        pass
    finally:
        report.expected_closes[f"{label}:{conn.close_code}"] += 1
        await conn.close()


async def run_fuzz(workdir: Path, *, frames: int = 100_000, seed: int = 13,
                   client_identities: int = 12, agent_connections: int = 4,
                   probes: int = 2) -> FuzzReport:
    """Start an ``irq serve`` in ``workdir`` and fuzz it with ``frames`` frames, half on each
    path."""
    settings = GatewaySettings()
    home = workdir / "fuzz-home"
    tokens = make_tokens(home, clients=client_identities + 1, agents=max(1, agent_connections // 2))
    missing = workdir / "no-db"  # DBOS contexts whose databases do not exist yet
    gw = GatewayProcess(home, [f"dbos+sqlite:///{missing}/a.db?context=local&poll=5"],
                        name="fuzz-gw")
    report = FuzzReport()
    gw.start()
    began = time.monotonic()
    stop = asyncio.Event()
    try:
        report.rss_before_kb = gw.rss_kb()
        bystander = asyncio.create_task(
            _bystander(gw.url, tokens["operator"][-1], report, stop))
        per_identity = 3  # connections per client identity, each under its own budget
        client_conns = client_identities * per_identity
        client_frames = frames // 2
        agent_frames = frames - client_frames
        # what one connection may spend: its own budget, or its share of its identity's
        client_rate = min(settings.client_frames_per_s,
                          settings.client_identity_frames_per_s / per_identity)
        agent_tokens = len(tokens["agent"])
        per_agent_token = -(-agent_connections // agent_tokens)
        agent_rate = min(settings.agent_frames_per_s,
                         settings.agent_identity_frames_per_s / per_agent_token)
        rng = random.Random(seed)

        async def phase(share: float, tag: str) -> None:
            conns = [await _open(gw.url, tokens["operator"][i // per_identity], report)
                     for i in range(client_conns)]
            aconns = [await _open(gw.agent_url, tokens["agent"][i % len(tokens["agent"])],
                                  report) for i in range(agent_connections)]
            jobs = []
            for i, (c, n) in enumerate(zip(conns, split(round(client_frames * share),
                                                        client_conns), strict=True)):
                jobs.append(_fuzz_connection(c, "/", n, random.Random(rng.random()), report,
                                             client_rate, f"{tag}c{i}"))
            for i, (c, n) in enumerate(zip(aconns, split(round(agent_frames * share),
                                                         agent_connections), strict=True)):
                jobs.append(_fuzz_connection(c, "/agent", n, random.Random(rng.random()),
                                             report, agent_rate, f"{tag}a{i}"))
            await asyncio.gather(*jobs)
            for c in conns + aconns:
                await c.close()

        await phase(0.2, "w")  # warm-up: caches, unknown-beat store, allocator pools
        report.rss_warm_kb = gw.rss_kb()
        await phase(0.8, "m")
        # the frames that close their own connection, while the bystander keeps pinging
        for i in range(probes):
            await _probe_close(gw.url, tokens["operator"][0],
                               "x" * (17 * 1024 * 1024), True, report, "17MiB")
            await _probe_close(gw.url, tokens["operator"][0],
                               b'{"type": "ping", "id": "' + bytes([0xff, 0xc0 + i]) + b'"}',
                               True, report, "utf8-in-text")
        await asyncio.sleep(2.0)  # settle before the last RSS sample
        report.rss_after_kb = gw.rss_kb()
        stop.set()
        await bystander
    finally:
        stop.set()
        report.crashes = 0 if gw.alive() else 1
        report.seconds = time.monotonic() - began
        gw.stop()
    return report
