"""Gateway at scale: 100,000 runs, 20,000 heartbeats/s in batched frames, 1/10/50 clients.

Prints one table and writes ``benchmarks/results/gateway_scale.json`` (``make bench`` then
runs ``scale_table.py``, which writes ``results/gateway.json``: these figures, key for key,
with the scale table of the whole run):

- ingest: heartbeats the gateway accepted per second (its own counter, ``stats``);
- state-change delivery p50/p99 per client count (1, 10, 50): runs turning ``late`` and
  ``lost`` because the synthetic agents silence a rotating slice of them; latency = the time a
  client read the event minus the event's ``updated_at`` (the gateway's clock when it decided
  the change; one machine, one clock);
- heartbeat age: how old the newest beat a client holds is, at most (p99 over samples);
- gateway CPU (% of one core) and RSS, memory per run;
- baseline: the same agent frames broadcast to 10 clients by a plain ``websockets`` server
  with no hub logic; the ratio is gateway CPU / baseline CPU at the same load;
- a reconnect storm: the 50 clients drop at once and reconnect with ``since``; time until all
  are current (hold the gateway's seq at their reconnect), and proof none missed an event
  (every client's sequence numbers are contiguous across the reconnect).

The gateway runs in its own process with a synthetic backend (the runs exist; nothing else);
agents and clients run in their own processes. ``--quick`` is a smaller run for a smoke test.

    .venv/bin/python benchmarks/gateway_scale.py [--runs 100000 --rate 20000 --seconds 15]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend_adapters.base import (  # noqa: E402
    ActionCapability,
    ActionOutcome,
    Capabilities,
    Observation,
)
from console.model import Action, Run  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "gateway_scale.json"
SNAPSHOT_HEAD = re.compile(r'\{"type":"snapshot","epoch":"([^"]*)","seq":(\d+)')
#: an event's head in an events frame (inside a JSON string a quote is escaped: no match)
EVENT_HEAD = re.compile(r'\{"seq":(\d+),"kind":"(\w+)"')
BEAT_AT = re.compile(r'"heartbeat_at":"([^"]+)"')
#: a client that fell behind gets its beats shed: one marker per run of them (seq = the last)
SHED = re.compile(r'\{"seq":(\d+),"kind":"shed","data":\{"from":(\d+),"beats":(\d+)\}\}')
INTERVAL_S = 5.0  # every run beats about every runs/rate seconds; announced cadence
TIMEOUT_S = 12.0  # late after 7.5 s of silence, lost after 12 s
SILENCE_WINDOW_S = 15.0  # a rotating slice of runs is silent for this long
SILENT_EVERY = 200  # one run in this many is in the silent slice


class SyntheticBackend:
    """Reports ``n`` running runs once (then nothing changed); every action is a no-op."""

    name = "bench"
    context = "local"
    url = "synthetic://"
    poll_interval_s = 5.0

    def __init__(self, n: int) -> None:
        self.n = n
        self.sent = False

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def capabilities(self) -> Capabilities:
        return Capabilities(backend="bench", actions={
            a: ActionCapability(False, "synthetic") for a in Action if a is not Action.DECIDE})

    async def observe(self) -> Observation:
        if self.sent:
            return Observation(runs=[])  # incremental: nothing changed
        self.sent = True
        now = datetime.now(UTC)
        return Observation(runs=[
            Run(id=f"bench:local/{native_id(i)}", backend="bench", context="local",
                native_id=native_id(i), name="synthetic", started_at=now)
            for i in range(self.n)])

    def focus(self, native_ids: set[str]) -> None: ...

    async def noop(self, *args: object, **kwargs: object) -> ActionOutcome:
        return ActionOutcome(detail="synthetic")


def native_id(i: int) -> str:
    return f"run-{i:06d}"


# ---------------------------------------------------------------------------- processes


def _serve(port: int, home: str, runs: int, profile: str | None = None,
           shed_after_s: float | None = None, shed_hold_s: float | None = None,
           profile_after_s: float = 0.0) -> None:
    """The gateway; ``profile``: a path where pyinstrument's report goes (written on
    SIGUSR1, which the benchmark sends before it stops the gateway), from
    ``profile_after_s`` after the gateway started to the end (0: the whole run)."""
    import signal

    from console.gateway.server import Gateway
    from console.gateway.settings import GatewaySettings

    profiler: Any = None
    if profile:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.005, async_mode="disabled")
        if not profile_after_s:
            profiler.start()

    async def main() -> None:
        if os.environ.get("IRQ_BENCH_STALLS"):
            _watch_stalls(Path(os.environ["IRQ_BENCH_STALLS"]),
                          float(os.environ.get("IRQ_BENCH_STALL_MS", "100")) / 1000)
        extra: dict[str, float] = {}
        if shed_after_s is not None:
            extra["shed_after_s"] = shed_after_s
        if shed_hold_s is not None:
            extra["shed_hold_s"] = shed_hold_s
        gw = Gateway(GatewaySettings(port=port, home=Path(home), **extra))
        gw.add_backend("bench:local", SyntheticBackend(runs))  # type: ignore[arg-type]
        await gw.start()
        done = asyncio.Event()
        if profiler is not None and profile_after_s:
            asyncio.get_running_loop().call_later(profile_after_s, profiler.start)

        def report() -> None:
            if profiler is not None and profile:
                profiler.stop()
                Path(profile).write_text(profiler.output_text(unicode=True, show_all=False))
                Path(profile).with_suffix(".html").write_text(profiler.output_html())
            done.set()

        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, report)
        await done.wait()
        await asyncio.Event().wait()

    asyncio.run(main())


def _watch_stalls(path: Path, stall_s: float = 0.1) -> None:
    """Diagnosis (``IRQ_BENCH_STALLS=PATH``): a thread that writes the event loop's stack to
    PATH whenever the loop has not run a 10 ms ticker for ``stall_s``."""
    import threading
    import traceback

    loop = asyncio.get_running_loop()
    main = threading.main_thread().ident
    last = [time.monotonic()]

    def tick() -> None:
        last[0] = time.monotonic()
        loop.call_later(0.01, tick)

    tick()

    def watch() -> None:
        reported, longest = 0.0, 0.0
        with path.open("w") as out:
            while True:
                time.sleep(0.02)
                behind = time.monotonic() - last[0]
                if behind > stall_s and last[0] != reported:
                    reported, longest = last[0], behind
                    frame = sys._current_frames().get(main or 0)
                    stack = "".join(traceback.format_stack(frame, limit=12)) if frame else ""
                    out.write(f"--- stalled at {time.time():.2f}\n{stack}\n")
                    out.flush()
                elif last[0] == reported:
                    longest = max(longest, behind)
                elif longest:
                    out.write(f"--- lasted {longest * 1000:.0f} ms\n")
                    out.flush()
                    longest = 0.0

    threading.Thread(target=watch, daemon=True).start()


def baseline_events(raw: str | bytes, seq: int, pending: list[bytes]) -> int:
    """The baseline's work for one agent frame: decoded, each beat made the same compact
    ``beat`` event the gateway sends (appended to ``pending``); returns the last seq.
    ``benchmarks/beat_floor.py`` times the same function in process."""
    frame = orjson.loads(raw)
    for beat in frame.get("beats", ()):
        seq += 1
        pending.append(orjson.dumps({"seq": seq, "kind": "beat", "data": {
            "id": f"{beat['backend']}:{beat['context']}/{beat['native_id']}",
            "heartbeat_at": beat["at"], "progress": beat["progress"]}}))
    return seq


def _serve_baseline(port: int) -> None:
    """Plain websockets, no hub: each agent frame is decoded, each beat becomes the same
    compact ``beat`` event the gateway sends, and every 100 ms one ``events`` frame goes to
    every client (``websockets.broadcast``), encoded once with the same codec (orjson)."""
    from websockets.asyncio.server import broadcast, serve

    clients: set[Any] = set()
    pending: list[bytes] = []
    seq = [0]

    async def handle(ws: Any) -> None:
        if ws.request.path.startswith("/agent"):
            async for raw in ws:
                seq[0] = baseline_events(raw, seq[0], pending)
            return
        clients.add(ws)
        try:
            async for _ in ws:
                pass
        finally:
            clients.discard(ws)

    async def flush() -> None:
        while True:
            await asyncio.sleep(0.1)
            if pending:
                frame = b'{"type":"events","events":[' + b",".join(pending) + b"]}"
                pending.clear()
                broadcast(clients, frame.decode())

    async def main() -> None:
        async with serve(handle, "127.0.0.1", port, max_size=16 << 20, compression=None):
            await flush()

    asyncio.run(main())


def _agents(url: str, token: str, runs: int, rate: int, seconds: float, conns: int) -> None:
    """``conns`` agent connections sending ``heartbeats`` frames of 100 beats; runs in the
    silent slice of the current window are skipped (they turn late, then lost)."""
    from websockets.asyncio.client import connect

    async def one(k: int) -> None:
        from websockets.exceptions import ConnectionClosed

        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                await session(k, end)
            except (ConnectionClosed, OSError, AttributeError) as exc:  # websockets 17 can raise AttributeError aborting a dead socket
                print(f"agent connection {k} lost ({exc}); reconnecting", file=sys.stderr)
                await asyncio.sleep(0.5)

    async def session(k: int, end: float) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        async with connect(url + "/agent", additional_headers=headers, max_size=None,
                           compression=None, open_timeout=60) as ws:
            await ws.send(json.dumps({"type": "hello", "protocol": 1}))
            reader = asyncio.create_task(_drain(ws))
            per_frame = 100
            frames_per_s = rate / conns / per_frame
            start = time.monotonic()
            i, sent = k, 0
            seq = int(time.time() * 1000)
            while time.monotonic() < end:
                window = int(time.time() / SILENCE_WINDOW_S) % SILENT_EVERY
                at = datetime.now(UTC).isoformat()
                beats = []
                while len(beats) < per_frame:
                    n = i % runs
                    i += conns
                    if n % SILENT_EVERY == window:
                        continue
                    seq += 1
                    beats.append({"backend": "bench", "context": "local",
                                  "native_id": native_id(n), "seq": seq, "at": at,
                                  "progress": (n % 100) / 100, "interval_s": INTERVAL_S,
                                  "timeout_s": TIMEOUT_S})
                await ws.send(orjson.dumps({"type": "heartbeats", "beats": beats}), text=True)
                sent += 1
                next_at = start + sent / frames_per_s
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            reader.cancel()

    async def main() -> None:
        await asyncio.gather(*(one(k) for k in range(conns)))

    asyncio.run(main())


async def _drain(ws: Any) -> None:
    async for raw in ws:
        frame = orjson.loads(raw)
        if frame.get("type") == "error":
            print("agent got", frame, file=sys.stderr)


class Client:
    """One subscribed client: compact beats; checks seq continuity; times state changes."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.epoch, self.seq = "", 0
        self.latencies: list[float] = []
        self.gaps = 0
        self.shed = 0  # beats the gateway shed for this client (it was behind)
        self.snapshots = 0
        self.replays = 0
        self.events = 0
        self.welcome_seq = 0
        self.current_at: float | None = None
        self.newest_beat: str | None = None  # ISO-8601, compared as text
        self.ages: list[float] = []
        self.ws: Any = None
        self.task: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        from websockets.asyncio.client import connect

        self.current_at = None
        self.ws = await connect(self.url, additional_headers={
            "Authorization": f"Bearer {self.token}"}, max_size=None, compression=None, max_queue=2,
            open_timeout=60)
        hello: dict[str, Any] = {"type": "hello", "protocol": 1, "client": "bench",
                                 "beats": "compact"}
        if self.epoch:
            hello.update(since=self.seq, epoch=self.epoch)
        await self.ws.send(json.dumps(hello))
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            async for raw in self.ws:
                if len(raw) > (1 << 20) and '"type":"snapshot"' in raw[:64]:
                    # a client of this benchmark needs only the snapshot's epoch and seq:
                    # decoding 100,000 runs in each of 50 clients would measure the clients
                    head = SNAPSHOT_HEAD.match(raw)
                    assert head is not None
                    self._frame({"type": "snapshot", "epoch": head[1], "seq": int(head[2])},
                                time.time())
                    continue
                if raw.startswith('{"type":"events"'):
                    self._events(raw, time.time())
                    continue
                self._frame(orjson.loads(raw), time.time())
        except ConnectionClosed:
            pass

    def _frame(self, frame: dict[str, Any], now: float) -> None:
        kind = frame.get("type")
        if kind == "welcome":
            self.welcome_seq = frame["seq"]
        elif kind == "snapshot":
            self.snapshots += 1
            self.epoch, self.seq = frame["epoch"], frame["seq"]
            self._maybe_current()
        elif kind == "events":
            if frame.get("replay"):
                self.replays += 1
            nowdt = datetime.fromtimestamp(now, UTC)
            for ev in frame["events"]:
                if not self._advance(ev["seq"]):
                    continue
                if ev["kind"] == "beat":
                    at = ev["data"]["heartbeat_at"]
                    if at and (self.newest_beat is None or at > self.newest_beat):
                        self.newest_beat = at
                elif ev["kind"] == "run" and ev["data"]["state"] in ("late", "lost"):
                    updated = datetime.fromisoformat(ev["data"]["updated_at"])
                    self.latencies.append((nowdt - updated).total_seconds())
            self._maybe_current()

    def _advance(self, seq: int) -> bool:
        """The next event's ``seq``: False when already seen; a gap is counted."""
        if seq <= self.seq:
            return False
        if seq != self.seq + 1:
            self.gaps += 1
        self.seq = seq
        self.events += 1
        return True

    def _events(self, raw: str, now: float) -> None:
        """An ``events`` frame, scanned rather than decoded (50 clients decoding every beat
        in one process on the same two cores would measure this process, not the gateway):
        the number of events by counting their heads and the first and last ``seq`` (a
        frame whose count and range disagree, or with ``shed`` markers, is checked head by
        head: a gap is still counted), the newest heartbeat time from the frame's last
        beat (beats come in the order the agents sent them), and only the events that are
        not beats decoded. The same checks as :meth:`_frame`."""
        if '"replay":true' in raw[:80]:
            self.replays += 1
        count = raw.count('{"seq":')
        if not count:
            return
        head = EVENT_HEAD.search(raw)
        tail = EVENT_HEAD.match(raw, raw.rfind('{"seq":'))
        assert head is not None and tail is not None
        first, last = int(head[1]), int(tail[1])
        shed = '"kind":"shed"' in raw
        if not shed and first == self.seq + 1 and last - first + 1 == count:
            self.seq, self.events = last, self.events + count  # contiguous, in order
        else:
            self._heads(raw, shed)
        beat = raw.rfind('"kind":"beat"')
        if beat >= 0:
            at = BEAT_AT.search(raw, beat)
            if at is not None and (self.newest_beat is None or at[1] > self.newest_beat):
                self.newest_beat = at[1]
        nowdt = datetime.fromtimestamp(now, UTC)
        end = raw.rfind("]")
        pos = raw.find('"kind":"run"')
        while pos >= 0:
            start = raw.rfind('{"seq":', 0, pos)
            stop = raw.find(',{"seq":', pos)
            ev = orjson.loads(raw[start:stop if stop >= 0 else end])
            if ev["data"]["state"] in ("late", "lost"):
                updated = datetime.fromisoformat(ev["data"]["updated_at"])
                self.latencies.append((nowdt - updated).total_seconds())
            pos = raw.find('"kind":"run"', pos + 1)
        self._maybe_current()

    def _heads(self, raw: str, has_shed: bool) -> None:
        """Every event's ``seq`` in turn: a gap is counted; a ``shed`` marker stands for the
        beats ``from..seq`` (no gap if it follows on)."""
        shed = {int(m[1]): (int(m[2]), int(m[3])) for m in SHED.finditer(raw)} \
            if has_shed else {}
        for head in EVENT_HEAD.finditer(raw):
            seq = int(head[1])
            if seq in shed:
                start, beats = shed[seq]
                self.shed += beats
                if seq > self.seq and start == self.seq + 1:
                    self.seq = seq
                    continue
            self._advance(seq)

    def _maybe_current(self) -> None:
        if self.current_at is None and self.seq >= self.welcome_seq and self.welcome_seq:
            self.current_at = time.monotonic()

    def sample_age(self) -> None:
        if self.newest_beat is not None:
            newest = datetime.fromisoformat(str(self.newest_beat))
            self.ages.append((datetime.now(UTC) - newest).total_seconds())

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self.task is not None:
            await asyncio.gather(self.task, return_exceptions=True)


def _clients(url: str, token: str, counts: list[int], seconds: float, storm: bool,
             out: Any) -> None:
    """Phases of 1, 10, 50 clients (added to the ones already connected), then the storm."""

    async def main() -> None:
        clients: list[Client] = []
        for count in counts:
            while len(clients) < count:
                client = Client(url, token)
                if clients:
                    # the others resume from the first one's place (a replay, not a
                    # snapshot each: 50 copies of 100,000 runs would measure this process)
                    client.epoch, client.seq = clients[0].epoch, clients[0].seq
                await client.connect()
                clients.append(client)
                if len(clients) == 1:
                    t0 = time.monotonic()
                    while client.snapshots == 0 and time.monotonic() - t0 < 120:
                        await asyncio.sleep(0.05)
                    out.put(("snapshot", time.monotonic() - t0))
            await asyncio.sleep(2.0)  # every new client has its snapshot
            for c in clients:
                c.latencies.clear()
                c.ages.clear()
            out.put(("phase_start", count, time.monotonic()))
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                await asyncio.sleep(0.5)
                for c in clients:
                    c.sample_age()
            out.put(("phase", count, time.monotonic(),
                     [lat for c in clients for lat in c.latencies],
                     [a for c in clients for a in c.ages],
                     sum(c.gaps for c in clients), sum(c.shed for c in clients)))
        if storm:
            before = [c.seq for c in clients]
            t0 = time.monotonic()
            await asyncio.gather(*(c.close() for c in clients))
            await asyncio.gather(*(c.connect() for c in clients))
            while any(c.current_at is None for c in clients) and time.monotonic() - t0 < 60:
                await asyncio.sleep(0.01)
            done = [c.current_at - t0 for c in clients if c.current_at is not None]
            await asyncio.sleep(1.0)
            out.put(("storm", len(clients), max(done) if done else None, len(done),
                     sum(c.gaps for c in clients), sum(c.replays for c in clients),
                     sum(1 for c in clients if c.snapshots > 1),
                     min(c.seq - b for c, b in zip(clients, before, strict=True))))
        await asyncio.gather(*(c.close() for c in clients))
        out.put(("end",))

    asyncio.run(main())


# ------------------------------------------------------------------------------ helpers


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _wait_port(port: int) -> None:
    for _ in range(600):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


def _stats(url: str, token: str) -> dict[str, Any]:
    for attempt in range(10):
        try:
            return _stats_once(url, token)
        except (TimeoutError, OSError):
            if attempt == 9:
                raise
            time.sleep(1.0)  # the gateway is indexing the runs of its first poll
    raise AssertionError("unreachable")


def _stats_once(url: str, token: str) -> dict[str, Any]:
    from websockets.sync.client import connect

    with connect(url, additional_headers={"Authorization": f"Bearer {token}"},
                 max_size=None, open_timeout=60) as ws:
        ws.send(json.dumps({"type": "hello", "protocol": 1, "subscribe": False,
                            "filter": {"kinds": ["backend"]}}))
        ws.send(json.dumps({"type": "query", "id": "s", "what": "stats"}))
        while True:
            frame = json.loads(ws.recv(timeout=60))
            if frame.get("type") == "answer":
                return dict(frame["data"])


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


# --------------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--rate", type=int, default=20_000, help="heartbeats per second")
    ap.add_argument("--seconds", type=float, default=15.0, help="per client-count phase")
    ap.add_argument("--clients", default="1,10,50")
    ap.add_argument("--agents", type=int, default=2, help="agent connections")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--quick", action="store_true", help="10,000 runs, 2,000 beats/s, 5 s")
    ap.add_argument("--shed-after", type=float, default=None, metavar="SECONDS",
                    help="the gateway's shed_after_s (0: never shed beats; default: its own)")
    ap.add_argument("--shed-hold", type=float, default=None, metavar="SECONDS",
                    help="the gateway's shed_hold_s (default: its own)")
    ap.add_argument("--profile", type=Path, default=None, metavar="PATH",
                    help="run the gateway under pyinstrument and write its report to PATH "
                         "(text) and PATH with .html")
    ap.add_argument("--profile-after", type=float, default=0.0, metavar="SECONDS",
                    help="start the profile this long after the gateway started (the runs "
                         "are indexed and beating by ~20 s: the steady state alone)")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.rate, args.seconds = 10_000, 2_000, 5.0
    counts = [int(c) for c in args.clients.split(",")]

    from console.gateway.auth import create_token
    from console.model import Role
    from console.processes import free_port

    load_before = _uptime()
    spawn = multiprocessing.get_context("spawn")
    home = tempfile.mkdtemp(prefix="irq-bench-")
    agent = create_token(Role.AGENT, "bench-agent", Path(home))
    viewer = create_token(Role.VIEWER, "bench-viewer", Path(home))
    port = free_port()
    url = f"ws://127.0.0.1:{port}"
    profile = str(args.profile.resolve()) if args.profile else None
    if profile:
        Path(profile).unlink(missing_ok=True)
    gateway = spawn.Process(target=_serve, args=(port, home, args.runs, profile, args.shed_after,
                                                       args.shed_hold, args.profile_after),
                            daemon=True)
    gateway.start()
    _wait_port(port)
    t_ready = time.monotonic()
    while _stats(url, viewer)["runs"] < args.runs:
        time.sleep(0.5)
        if time.monotonic() - t_ready > 120:
            raise SystemExit("the gateway did not index the runs in 120 s")
    rss_idle = _rss_mb(gateway.pid)

    total_s = 3600.0  # until killed
    agents = spawn.Process(target=_agents, args=(
        url, agent, args.runs, args.rate, total_s, args.agents), daemon=True)
    agents.start()
    time.sleep(6.0)  # warm up: the silent slice needs 7.5 s to turn late

    out = spawn.Queue()
    clients = spawn.Process(target=_clients, args=(
        url, viewer, counts, args.seconds, True, out), daemon=True)
    clients.start()
    phases: dict[int, dict[str, Any]] = {}
    storm: dict[str, Any] = {}
    started: dict[int, tuple[float, float, int]] = {}
    snapshot_s = None
    rss_peak = 0.0
    while True:
        msg = out.get(timeout=300)
        if msg[0] == "phase_start":
            begun = _stats(url, viewer)
            started[msg[1]] = (time.monotonic(), _cpu_seconds(gateway.pid),
                               begun["beats_accepted"], begun.get("updates_shed", 0))
        elif msg[0] == "phase":
            count, _t, lats, ages, gaps, seen_shed = msg[1:7]
            t0, cpu0, beats0, shed0 = started[count]
            stats = _stats(url, viewer)
            wall = time.monotonic() - t0
            rss_peak = max(rss_peak, _rss_mb(gateway.pid))
            phases[count] = {
                "clients": count,
                "ingest_per_s": (stats["beats_accepted"] - beats0) / wall,
                "state_changes": len(lats),
                "p50_ms": _ms(_pct(lats, 0.5)), "p99_ms": _ms(_pct(lats, 0.99)),
                "p50": _pct(lats, 0.5), "p99": _pct(lats, 0.99),
                "beat_age_p99_s": _pct(ages, 0.99),
                "cpu_pct": 100 * (_cpu_seconds(gateway.pid) - cpu0) / wall,
                "gaps": gaps, "resyncs": stats.get("client_resyncs", 0),
                # beat events not sent to clients that were behind (the gateway's count
                # over the phase; the clients' markers since they connected)
                "shed": stats.get("updates_shed", 0) - shed0, "shed_seen": seen_shed,
            }
        elif msg[0] == "storm":
            storm = {"clients": msg[1], "all_current_s": msg[2], "current": msg[3],
                     "gaps": msg[4], "replays": msg[5], "snapshots": msg[6],
                     "min_events_after": msg[7]}
        elif msg[0] == "snapshot":
            snapshot_s = msg[1]
        elif msg[0] == "end":
            break
    clients.join(10)
    rss = _rss_mb(gateway.pid)
    rss_peak = max(rss_peak, rss)
    agents.kill()
    if profile and gateway.pid is not None:
        import signal

        os.kill(gateway.pid, signal.SIGUSR1)
        for _ in range(600):
            if Path(profile).with_suffix(".html").exists():
                break
            time.sleep(0.1)
        print(f"  profile of the gateway process: {profile}")
    gateway.kill()
    gateway.join(5)
    agents.join(5)

    # the baseline: the same agents, 10 clients, plain websockets broadcast
    bport = free_port()
    base = spawn.Process(target=_serve_baseline, args=(bport,), daemon=True)
    base.start()
    _wait_port(bport)
    burl = f"ws://127.0.0.1:{bport}"

    async def sinks(n: int, seconds: float) -> int:
        from websockets.asyncio.client import connect

        got = [0]

        async def sink() -> None:
            async with connect(burl, max_size=None, compression=None) as ws:
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    try:
                        raw = await asyncio.wait_for(ws.recv(), 1)
                    except TimeoutError:
                        continue
                    got[0] += len(orjson.loads(raw).get("events", ()))

        await asyncio.gather(*(sink() for _ in range(n)))
        return got[0]

    bagents = spawn.Process(target=_agents, args=(
        burl, "x", args.runs, args.rate, args.seconds + 6, args.agents), daemon=True)
    bagents.start()
    time.sleep(2.0)
    bcpu0, bt0 = _cpu_seconds(base.pid), time.monotonic()
    got = asyncio.run(sinks(10, args.seconds))
    bwall = time.monotonic() - bt0
    base_cpu = 100 * (_cpu_seconds(base.pid) - bcpu0) / bwall
    bagents.kill()
    base.kill()

    ref = phases.get(10) or phases[max(phases)]
    ratio = ref["cpu_pct"] / base_cpu if base_cpu else None
    load_after = _uptime()
    print(f"gateway at scale: {args.runs:,} runs, {args.rate:,} heartbeats/s offered in "
          f"heartbeats frames of 100 ({args.agents} agent connections), {os.cpu_count()} "
          f"cores")
    print(f"  load before: {load_before}")
    print(f"  load after:  {load_after}")
    print(f"  {'clients':>7} {'ingest/s':>9} {'state changes':>13} {'p50 ms':>7} "
          f"{'p99 ms':>7} {'beat age p99':>12} {'CPU %':>6} {'gaps':>5} {'resyncs':>7} "
          f"{'beats shed':>10}")
    for count in counts:
        p = phases[count]
        age = p["beat_age_p99_s"]
        print(f"  {count:>7} {p['ingest_per_s']:>9.0f} {p['state_changes']:>13} "
              f"{p['p50_ms']:>7} {p['p99_ms']:>7} "
              f"{('-' if age is None else f'{age:.2f} s'):>12} {p['cpu_pct']:>6.0f} "
              f"{p['gaps']:>5} {p['resyncs']:>7} {p['shed']:>10}")
    print(f"  gateway RSS {rss:.0f} MB (peak {rss_peak:.0f} MB; {rss_idle:.0f} MB with the "
          f"runs indexed, before any beat) = {rss * 1024 / args.runs:.2f} KiB per run")
    print(f"  baseline (plain websockets broadcast of the same frames to 10 clients): "
          f"{base_cpu:.0f} % CPU, {got / bwall:.0f} beats/s delivered; gateway/baseline "
          f"CPU = {ratio:.2f}x" if ratio else "  baseline: no CPU measured")
    if snapshot_s is not None:
        print(f"  first client: snapshot of {args.runs:,} runs received after "
              f"{snapshot_s:.1f} s (the other clients resume from its seq: a replay)")
    if storm:
        cur = storm["all_current_s"]
        print(f"  reconnect storm: {storm['clients']} clients dropped and reconnected; "
              f"{storm['current']}/{storm['clients']} current after "
              f"{'-' if cur is None else f'{cur * 1000:.0f} ms'}; replays "
              f"{storm['replays']}, snapshots {storm['snapshots']}, sequence gaps "
              f"{storm['gaps']} (0 = none missed an event)")
    result = {
        "runs": args.runs,
        "rate_offered": args.rate,
        "cores": os.cpu_count(),
        "ingest_per_s": round(ref["ingest_per_s"]),
        "ingest_per_s_by_clients": {str(c): round(p["ingest_per_s"]) for c, p in phases.items()},
        "state_change_p50_ms": {str(c): _r(p["p50"]) for c, p in phases.items()},
        "state_change_p99_ms": {str(c): _r(p["p99"]) for c, p in phases.items()},
        "state_changes": {str(c): p["state_changes"] for c, p in phases.items()},
        "beat_age_p99_s": {str(c): p["beat_age_p99_s"] for c, p in phases.items()},
        "cpu_pct": {str(c): round(p["cpu_pct"], 1) for c, p in phases.items()},
        "beats_shed": {str(c): p["shed"] for c, p in phases.items()},
        "rss_mb": round(rss, 1),
        "rss_peak_mb": round(rss_peak, 1),
        "rss_indexed_mb": round(rss_idle, 1),
        "kib_per_run": round(rss * 1024 / args.runs, 2),
        "baseline_cpu_pct": round(base_cpu, 1),
        "baseline_ratio": round(ratio, 2) if ratio else None,
        "reconnect_storm": storm,
        "first_snapshot_s": snapshot_s,
        "load_before": load_before,
        "load_after": load_after,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"  wrote {args.out}")


def _r(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


if __name__ == "__main__":
    main()
