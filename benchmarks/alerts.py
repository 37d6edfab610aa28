"""Alerts at 10,000 runs: condition begins -> alert visible to a client and -> webhook
delivered, per kind; the evaluator's cost per tick; "raised once"; then the polling cost of
the backend-side alert facts against real servers.

Gateway phase (the in-process ``Gateway`` in its own process, as gateway_scale.py runs it):

- 10,000 synthetic runs (a synthetic backend added with ``Gateway.add_backend``, polled every
  second) beating through the agent channel every ``--beat-every`` seconds with moving
  progress, from an agent process; a local HTTP receiver routed for every alert kind by a
  ``[[notify.webhooks]] events = [...]`` entry; a ``GatewayClient`` subscribed (the console's).
- Then, per kind, the condition starts on ``--samples`` runs, staggered over ``--stagger``
  seconds: ``stalled`` (the agent keeps beating, the progress stops), ``interrupt_overdue``
  (a pending interrupt whose deadline passes), ``given_up`` and ``retrying`` (the backend
  reports the run so), ``leak_suspected`` (the backend reports a run ended while its agent
  still reports a GPU held), ``no_workers`` (the backend reports a queue nobody polls),
  ``liveness_unknown`` (``--dark`` more backend contexts stop answering).
- "Begins" is when the world changed: the deadline, the backend's change (it is seen at the
  next poll, <= 1 s later), the last beat whose progress moved, the last answer of a context.
  Each kind waits by design before it may raise (the grace period; ``stalled_after`` for
  stalled; the poll budget for liveness_unknown): that wait is reported per kind, and the
  latency minus it is irq's own cost (polling, evaluator tick, journal, fan-out, HTTP).
- Raised once: the webhook POSTs per alert id (exactly one expected), and alerts of a kind on
  runs that were not sampled (false positives: none expected).
- Cost: every condition source and every evaluator tick timed inside the gateway process;
  the gateway's CPU % over ``--cpu-seconds`` with the evaluator on and with it off (its tick
  replaced by a no-op in-process), same beats.

Backend phase (benchmarks/alert_polling.py): the queries behind ``no_workers`` against the
real servers the devtools start.

    .venv/bin/python benchmarks/alerts.py [--runs 10000 --samples 50] [--quick] [--skip-backends]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import signal
import sys
import tempfile
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend_adapters.base import (  # noqa: E402
    ActionCapability,
    ActionOutcome,
    BackendError,
    Capabilities,
    Observation,
)
from benchmarks.gateway_scale import _cpu_seconds, _rss_mb, _stats, _wait_port  # noqa: E402
from benchmarks.latency_stats import dist  # noqa: E402
from benchmarks.results_file import write_results  # noqa: E402
from console.alert_model import AlertKind, Condition  # noqa: E402
from console.model import Action, Interrupt, Run, RunState  # noqa: E402
from console.run_facts import RunError, StepRetry  # noqa: E402

#: kinds driven through the synthetic backend (its state changes), by the agent (stalled),
#: and by contexts that stop answering (liveness_unknown)
BACKEND_KINDS = ("given_up", "retrying", "leak_suspected", "no_workers", "interrupt_overdue")
KINDS = ("stalled", *BACKEND_KINDS, "liveness_unknown")
POLL_S = 1.0  # the synthetic backends' poll interval
INTERRUPT_LEAD_S = 2.0  # an interrupt is pending this long before its deadline passes
GPU = {"id": "gpu-0", "kind": "gpu", "state": "held", "on_pause": "keep"}


def native_id(i: int) -> str:
    return f"run-{i:05d}"


def samples(runs: int, per_kind: int) -> dict[str, list[int]]:
    """Disjoint run indexes per run-level kind, spread over the fleet."""
    step = max(1, runs // (per_kind * 6))
    out: dict[str, list[int]] = {}
    for k, kind in enumerate(("stalled", "given_up", "retrying", "leak_suspected",
                              "interrupt_overdue")):
        out[kind] = [(j * 6 + k) * step for j in range(per_kind)]
    return out


def offset(j: int, per_kind: int, stagger: float) -> float:
    """When sample ``j`` of a kind begins, after T0 (the alert phase's start)."""
    return 1.0 + stagger * j / max(1, per_kind)


# ------------------------------------------------------------------ synthetic backends


class _Synthetic:
    name = "bench"
    url = "synthetic://"
    poll_interval_s = POLL_S

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def capabilities(self) -> Capabilities:
        return Capabilities(backend="bench", actions={
            a: ActionCapability(False, "synthetic") for a in Action if a is not Action.DECIDE})

    def focus(self, native_ids: set[str]) -> None: ...

    async def noop(self, *args: object, **kwargs: object) -> ActionOutcome:
        return ActionOutcome(detail="synthetic")


class FleetBackend(_Synthetic):
    """``n`` running runs; from T0 (a shared value the benchmark sets) the sampled runs
    change as the plan says, each at its offset: given up, retrying, ended with a resource
    held, an interrupt with a deadline; and queues nobody polls (``no_workers``)."""

    context = "local"

    def __init__(self, n: int, plan: dict[str, list[int]], per_kind: int, stagger: float,
                 t0: Any) -> None:
        self.n, self.plan, self.per_kind, self.stagger, self.t0 = n, plan, per_kind, stagger, t0
        self.sent = False
        self.applied: set[tuple[str, int]] = set()

    def _run(self, i: int, **update: Any) -> Run:
        return Run(id=f"bench:local/{native_id(i)}", backend="bench", context="local",
                   native_id=native_id(i), name="synthetic", **update)

    async def observe(self) -> Observation:
        if not self.sent:
            self.sent = True
            return Observation(runs=[self._run(i, started_at=datetime.now(UTC))
                                     for i in range(self.n)])
        t0 = self.t0.value
        if not t0:
            return Observation(runs=[])  # incremental: nothing changed
        now = time.time()
        runs: list[Run] = []
        interrupts: list[Interrupt] = []
        conditions: list[Condition] = []
        for kind in ("given_up", "retrying", "leak_suspected", "interrupt_overdue",
                     "no_workers"):
            for j in range(self.per_kind):
                at = t0 + offset(j, self.per_kind, self.stagger)
                if kind == "interrupt_overdue":
                    at -= INTERRUPT_LEAD_S  # pending before its deadline passes
                if at > now:
                    break
                if kind == "no_workers":
                    conditions.append(Condition(
                        kind=AlertKind.NO_WORKERS, subject=f"bench:local/queue-{j:03d}",
                        detail=f"task queue queue-{j:03d}: no worker polls it",
                        action="start a worker", backend="bench", context="local"))
                    continue
                i = self.plan[kind][j]
                if kind == "interrupt_overdue":
                    run_id = f"bench:local/{native_id(i)}"
                    interrupts.append(Interrupt(
                        id=f"{run_id}#approve", run_id=run_id, native_id="approve",
                        title="approve the refund", created_at=_dt(at),
                        deadline_at=_dt(at + INTERRUPT_LEAD_S)))
                    continue
                if (kind, j) in self.applied:
                    continue
                self.applied.add((kind, j))
                runs.append(self._changed(kind, i, at))
        return Observation(runs=runs, interrupts=interrupts, conditions=conditions)

    def _changed(self, kind: str, i: int, at: float) -> Run:
        if kind == "given_up":
            return self._run(i, state=RunState.GIVEN_UP, error=RunError(
                type="PaymentError", message="card declined", step="charge", at=_dt(at)))
        if kind == "retrying":
            return self._run(i, retrying=StepRetry(
                step="charge", attempt=3, last_error="timeout",
                next_attempt_at=_dt(at + 30)))
        return self._run(i, state=RunState.COMPLETED)  # leak: its agent still holds a GPU


class DarkBackend(_Synthetic):
    """One run; stops answering at T0 + its offset (liveness_unknown)."""

    def __init__(self, k: int, at: float, t0: Any) -> None:
        self.context = f"dark-{k:02d}"
        self.at, self.t0 = at, t0
        self.sent = False

    async def observe(self) -> Observation:
        t0 = self.t0.value
        if t0 and time.time() >= t0 + self.at:
            raise BackendError("connection refused (the benchmark darkened this context)")
        if self.sent:
            return Observation(runs=[])
        self.sent = True
        return Observation(runs=[Run(id=f"bench:{self.context}/run-0", backend="bench",
                                     context=self.context, native_id="run-0",
                                     started_at=datetime.now(UTC))])


def _dt(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


# ------------------------------------------------------------------------ the gateway


def _serve(port: int, home: str, cfg: dict[str, Any], t0: Any, out: Any) -> None:
    """The gateway with the synthetic backends; every condition source, the active-alerts
    read and every tick timed. SIGUSR2 toggles the evaluator (off: its tick does nothing);
    SIGUSR1 sends the timings to ``out``."""
    from console.gateway.server import Gateway
    from console.gateway.settings import GatewaySettings
    from console.notify_config import ALERT_KINDS, NotifySettings, WebhookConfig

    notify = NotifySettings(per_kind=1000, window_s=60.0, webhooks=[
        WebhookConfig(url=cfg["hook"], events=list(ALERT_KINDS))])
    settings = GatewaySettings(
        port=port, home=Path(home), notify=notify, alert_grace_s=cfg["grace"],
        stalled_after_s=cfg["stalled_after"], poll_budget_s=cfg["budget"])
    timings: dict[str, list[float]] = defaultdict(list)
    enabled = [True]

    def timed(name: str, fn: Any) -> Any:
        def call(*args: Any) -> Any:
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                result = fn(*args)
                return list(result) if name.startswith("source:") else result
            finally:  # wall time (what the event loop waits) and this thread's CPU time
                timings[name].append(time.perf_counter() - start)
                timings["cpu:" + name].append(time.thread_time() - cpu)
        call.__name__ = name
        return call

    async def main() -> None:
        gw = Gateway(settings)
        plan = samples(cfg["runs"], cfg["samples"])
        gw.add_backend("bench:local", FleetBackend(  # type: ignore[arg-type]
            cfg["runs"], plan, cfg["samples"], cfg["stagger"], t0))
        for k in range(cfg["dark"]):
            dark = DarkBackend(k, offset(k, cfg["dark"], cfg["stagger"]), t0)
            gw.add_backend(f"bench:{dark.context}", dark)  # type: ignore[arg-type]
        ev = gw.alert_evaluator
        ev.sources = [timed(f"source:{getattr(s, '__name__', 'extra')}", s)
                      for s in ev.sources]
        ev.store.active = timed("journal:active", ev.store.active)  # type: ignore[method-assign]
        # a tick is two halves since the journal work left the loop: the sources on the event
        # loop ("tick": what the loop waits for) and ``apply`` on a worker thread; off, both
        # do nothing (no source walks the runs, no journal work)
        on_loop = timed("tick", ev.conditions)
        apply = ev.apply

        def switchable_conditions() -> dict[str, Any]:
            return on_loop() if enabled[0] else {}

        def switchable_apply(seen: dict[str, Any], now: Any) -> list[Any]:
            return apply(seen, now) if enabled[0] else []

        ev.conditions = switchable_conditions  # type: ignore[method-assign]
        ev.apply = switchable_apply  # type: ignore[method-assign]
        await gw.start()
        loop = asyncio.get_running_loop()

        def toggle() -> None:
            enabled[0] = not enabled[0]
            if enabled[0]:
                timings.clear()  # the ticks of the alert phase only, from here on

        def report() -> None:
            out.put(({k: list(v) for k, v in timings.items()}, gw.stats()))

        loop.add_signal_handler(signal.SIGUSR2, toggle)
        loop.add_signal_handler(signal.SIGUSR1, report)
        await asyncio.Event().wait()

    asyncio.run(main())


# ------------------------------------------------------------------------- the agents


def _agents(url: str, token: str, cfg: dict[str, Any], t0: Any, out: Any) -> None:
    """Every run beats every ``beat_every`` s with moving progress, in frames of 100 beats;
    from T0 + its offset a ``stalled`` sample keeps beating with its progress frozen (the
    time of its last moving beat goes to ``out``); ``leak_suspected`` samples report a GPU."""
    from websockets.asyncio.client import connect

    runs, every = cfg["runs"], cfg["beat_every"]
    plan = samples(runs, cfg["samples"])
    stall_at = {i: offset(j, cfg["samples"], cfg["stagger"])
                for j, i in enumerate(plan["stalled"])}
    leaking = set(plan["leak_suspected"])
    ticks = [0] * runs
    last_moved = [0.0] * runs
    frozen: set[int] = set()

    async def main() -> None:
        async with connect(url + "/agent", additional_headers={
                "Authorization": f"Bearer {token}"}, max_size=None, compression=None,
                open_timeout=60) as ws:
            await ws.send(json.dumps({"type": "hello", "protocol": 1}))
            drain = asyncio.create_task(_drain(ws))
            per_frame = 100
            frames_per_s = runs / every / per_frame
            start, sent, i, seq = time.monotonic(), 0, 0, int(time.time() * 1000)
            while True:
                now = time.time()
                at = datetime.now(UTC).isoformat()
                beats = []
                for _ in range(per_frame):
                    n = i % runs
                    i += 1
                    seq += 1
                    begin = stall_at.get(n)
                    if begin is not None and t0.value and now >= t0.value + begin:
                        if n not in frozen:
                            frozen.add(n)
                            out.put(("stalled", n, last_moved[n]))
                    else:
                        ticks[n] += 1
                        last_moved[n] = now
                    beat: dict[str, Any] = {
                        "backend": "bench", "context": "local", "native_id": native_id(n),
                        "seq": seq, "at": at, "progress": (ticks[n] % 1000) / 1000,
                        "interval_s": every, "timeout_s": every * 4}
                    if n in leaking:
                        beat["resources"] = [GPU]
                    beats.append(beat)
                await ws.send(orjson.dumps({"type": "heartbeats", "beats": beats}), text=True)
                sent += 1
                await asyncio.sleep(max(0.0, start + sent / frames_per_s - time.monotonic()))
            drain.cancel()

    asyncio.run(main())


async def _drain(ws: Any) -> None:
    async for raw in ws:
        frame = orjson.loads(raw)
        if frame.get("type") == "error":
            print("agent got", frame, file=sys.stderr)


# ------------------------------------------------------------- client and webhook sink


def _receiver(port: int, out: Any, stop: Any) -> None:
    """The webhook receiver, in its own process (the client's decoding must not delay the
    POSTs' timestamps): each POST's arrival time and body go to ``out``; HTTP/1.1 keep-alive
    as httpx uses it; 204 to every POST."""

    async def receive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                out.put((time.time(), orjson.loads(body)))
                writer.write(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        await asyncio.start_server(receive, "127.0.0.1", port)
        while not stop.value:
            await asyncio.sleep(0.2)

    asyncio.run(main())


class Observer:
    """The subscribed client: the alerts as it sees them, and when."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[float, dict[str, Any]]] = {}  # alert id -> (t, alert)
        self.posts: list[tuple[float, dict[str, Any]]] = []  # from the receiver process
        self.client_events = 0

    async def watch(self, client: Any, until: float) -> None:
        while time.time() < until:
            try:
                batch = await asyncio.wait_for(client.updates(), 0.5)
            except TimeoutError:
                continue
            if batch is None:
                return
            now = time.time()
            for ev in batch:
                self.client_events += 1
                if ev.get("kind") == "alert":
                    data = ev.get("data") or {}
                    if data.get("state") == "open" and data.get("id") not in self.seen:
                        self.seen[data["id"]] = (now, data)


# ----------------------------------------------------------------------------- main


def gateway_phase(args: argparse.Namespace) -> dict[str, Any]:
    from console.client import GatewayClient
    from console.gateway.auth import create_token
    from console.model import Role
    from console.processes import free_port

    spawn = multiprocessing.get_context("spawn")
    home = tempfile.mkdtemp(prefix="irq-bench-alerts-")
    agent = create_token(Role.AGENT, "bench-agent", Path(home))
    viewer = create_token(Role.VIEWER, "bench-viewer", Path(home))
    port, hook_port = free_port(), free_port()
    url = f"ws://127.0.0.1:{port}"
    cfg = {"runs": args.runs, "samples": args.samples, "stagger": args.stagger,
           "dark": args.dark, "grace": args.grace, "stalled_after": args.stalled_after,
           "budget": args.budget, "beat_every": args.beat_every,
           "hook": f"http://127.0.0.1:{hook_port}/hook"}
    t0 = spawn.Value("d", 0.0)
    timings_out, stalls_out = spawn.Queue(), spawn.Queue()
    gateway = spawn.Process(target=_serve, args=(port, home, cfg, t0, timings_out), daemon=True)
    gateway.start()
    _wait_port(port)
    t_ready = time.monotonic()
    while _stats(url, viewer)["runs"] < args.runs + args.dark:
        time.sleep(0.5)
        if time.monotonic() - t_ready > 120:
            raise SystemExit("the gateway did not index the runs in 120 s")
    agents = spawn.Process(target=_agents, args=(url, agent, cfg, t0, stalls_out), daemon=True)
    agents.start()
    obs = Observer()
    figures: dict[str, Any] = {}

    hooks_out, hooks_stop = spawn.Queue(), spawn.Value("b", 0)
    receiver = spawn.Process(target=_receiver, args=(hook_port, hooks_out, hooks_stop),
                             daemon=True)
    receiver.start()

    async def drive() -> None:
        await asyncio.sleep(args.beat_every + 2)  # warm up: every run has beaten
        async with GatewayClient(url, viewer, client="bench-alerts",
                                 request_timeout=120) as client:
            # CPU with the evaluator on, then off (its tick a no-op), same beats
            cpu: dict[str, float] = {}
            for label in ("on", "off"):
                if label == "off":
                    os.kill(gateway.pid, signal.SIGUSR2)
                c0, w0 = _cpu_seconds(gateway.pid), time.monotonic()
                await obs.watch(client, time.time() + args.cpu_seconds)
                cpu[label] = 100 * (_cpu_seconds(gateway.pid) - c0) / (time.monotonic() - w0)
            os.kill(gateway.pid, signal.SIGUSR2)  # on again; its timings restart
            figures["cpu_pct"] = {k: round(v, 1) for k, v in cpu.items()}
            figures["unexpected_before_t0"] = dict(Counter(
                d.get("kind", "") for _t, d in obs.seen.values()))
            before = set(obs.seen)
            t0.value = time.time()
            horizon = t0.value + 1 + args.stagger + max(
                args.grace, args.stalled_after, args.budget) + args.settle
            await obs.watch(client, horizon)
            figures["t0"] = t0.value
            figures["before"] = before

    asyncio.run(drive())
    os.kill(gateway.pid, signal.SIGUSR1)
    timings, stats = timings_out.get(timeout=60)
    rss = _rss_mb(gateway.pid)
    hooks_stop.value = 1
    while True:
        try:
            obs.posts.append(hooks_out.get(timeout=2))
        except Exception:  # queue.Empty: all read
            break
    receiver.join(5)
    stall_begins: dict[int, float] = {}
    while not stalls_out.empty():
        _, n, moved = stalls_out.get()
        stall_begins[n] = moved
    agents.kill()
    gateway.kill()
    gateway.join(5)
    return summarize(args, figures, obs, timings, stats, stall_begins, rss)


def begins(args: argparse.Namespace, t0: float,
           stall_begins: dict[int, float]) -> dict[tuple[str, str], float]:
    """(kind, subject) -> when that condition began in the world (epoch seconds)."""
    plan = samples(args.runs, args.samples)
    out: dict[tuple[str, str], float] = {}
    for kind in ("given_up", "retrying", "interrupt_overdue", "leak_suspected"):
        for j, i in enumerate(plan[kind]):
            run = f"bench:local/{native_id(i)}"
            subject = {"interrupt_overdue": f"{run}#approve",
                       "leak_suspected": f"{run}/gpu-0"}.get(kind, run)
            out[(kind, subject)] = t0 + offset(j, args.samples, args.stagger)
    for j in range(args.samples):
        out[("no_workers", f"bench:local/queue-{j:03d}")] = t0 + offset(
            j, args.samples, args.stagger)
    for n, moved in stall_begins.items():
        out[("stalled", f"bench:local/{native_id(n)}")] = moved
    for k in range(args.dark):
        out[("liveness_unknown", f"bench:dark-{k:02d}")] = t0 + offset(k, args.dark,
                                                                       args.stagger)
    return out


def designed_wait(args: argparse.Namespace, kind: str) -> float:
    """How long a condition of ``kind`` must hold before irq may raise it, by design."""
    if kind == "stalled":
        return max(args.stalled_after, args.grace)
    if kind == "liveness_unknown":
        return max(args.budget, args.grace)
    return args.grace


def summarize(args: argparse.Namespace, figures: dict[str, Any], obs: Observer,
              timings: dict[str, list[float]], stats: dict[str, Any],
              stall_begins: dict[int, float], rss: float) -> dict[str, Any]:
    t0 = figures["t0"]
    started = begins(args, t0, stall_begins)
    posts: dict[str, list[float]] = defaultdict(list)
    for at, body in obs.posts:
        alert = body.get("alert") or {}
        if alert.get("id"):
            posts[alert["id"]].append(at)
    per_kind: dict[str, Any] = {}
    unexpected: Counter[str] = Counter()
    for kind in KINDS:
        visible, delivered = [], []
        for alert_id, (at, data) in obs.seen.items():
            if data.get("kind") != kind or alert_id in figures["before"]:
                continue
            begin = started.get((kind, data.get("subject", "")))
            if begin is None:
                unexpected[kind] += 1
                continue
            visible.append(at - begin)
            if posts.get(alert_id):
                delivered.append(posts[alert_id][0] - begin)
        wait = designed_wait(args, kind)
        expected = sum(1 for (k, _s) in started if k == kind)
        per_kind[kind] = {
            "conditions": expected, "alerts_seen": len(visible), "webhooks": len(delivered),
            "designed_wait_s": wait,
            "visible": dist(visible), "webhook": dist(delivered),
            "visible_minus_wait": dist([v - wait for v in visible]),
            "webhook_minus_wait": dist([v - wait for v in delivered]),
        }
    duplicates = {a: len(ts) for a, ts in posts.items() if len(ts) > 1}
    not_posted = [a for a in obs.seen if a not in posts and a not in figures["before"]]
    tick = timings.get("tick", [])
    sources = {name.split(":", 1)[1]: _ms_dist(v) for name, v in sorted(timings.items())
               if name.startswith("source:")}
    return {
        "runs": args.runs, "samples_per_kind": args.samples, "dark_contexts": args.dark,
        "stagger_s": args.stagger, "grace_s": args.grace, "stalled_after_s": args.stalled_after,
        "poll_budget_s": args.budget, "poll_interval_s": POLL_S,
        "beats_per_s": round(args.runs / args.beat_every),
        "per_kind": per_kind,
        "raised_once": {"webhook_posts": len(obs.posts), "alerts_posted": len(posts),
                        "alerts_with_more_than_one_post": len(duplicates),
                        "alerts_seen_without_post": len(not_posted),
                        "unexpected_alerts": dict(unexpected),
                        "alerts_before_conditions": figures["unexpected_before_t0"]},
        "evaluator": {"tick_ms": _ms_dist(tick), "journal_active_ms": _ms_dist(
            timings.get("journal:active", [])), "sources_ms": sources,
            "tick_cpu_ms": _ms_dist(timings.get("cpu:tick", [])),
            "journal_active_cpu_ms": _ms_dist(timings.get("cpu:journal:active", [])),
            "sources_cpu_ms": {name.split(":", 2)[2]: _ms_dist(v)
                               for name, v in sorted(timings.items())
                               if name.startswith("cpu:source:")}},
        "gateway_cpu_pct": figures["cpu_pct"], "gateway_rss_mb": round(rss, 1),
        "gateway_alert_counters": stats.get("alerts", {}),
        "notifications": stats.get("notifications", {}),
    }


def _ms_dist(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    if not ordered:
        return {"n": 0}
    return {"n": len(ordered), "mean": round(1000 * sum(ordered) / len(ordered), 3),
            "p50": round(1000 * ordered[len(ordered) // 2], 3),
            "p95": round(1000 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3),
            "max": round(1000 * ordered[-1], 3)}


def print_table(res: dict[str, Any]) -> None:
    print(f"alerts at {res['runs']:,} runs ({res['beats_per_s']:,} beats/s), grace "
          f"{res['grace_s']:g} s, stalled_after {res['stalled_after_s']:g} s, poll budget "
          f"{res['poll_budget_s']:g} s, synthetic backends polled every "
          f"{res['poll_interval_s']:g} s")
    print(f"  {'kind':<18} {'n':>4} {'wait':>5} | {'visible p50':>11} {'p95':>6} {'max':>6} | "
          f"{'webhook p50':>11} {'p95':>6} {'max':>6} | {'irq p50':>7} {'p95':>6}")
    for kind, k in res["per_kind"].items():
        v, w, own = k["visible"], k["webhook"], k["visible_minus_wait"]
        print(f"  {kind:<18} {k['alerts_seen']:>2}/{k['conditions']:<2} {k['designed_wait_s']:>4g}s"
              f" | {v['p50_s']:>11} {v['p95_s']:>6} {v['max_s']:>6} | {w['p50_s']:>11} "
              f"{w['p95_s']:>6} {w['max_s']:>6} | {own['p50_s']:>7} {own['p95_s']:>6}")
    print("  (seconds from condition begins; 'irq' = visible minus the designed wait)")
    once = res["raised_once"]
    print(f"  raised once: {once['webhook_posts']} POSTs for {once['alerts_posted']} alerts, "
          f"{once['alerts_with_more_than_one_post']} alerts posted twice, "
          f"{once['alerts_seen_without_post']} seen without a POST, unexpected "
          f"{once['unexpected_alerts'] or 0}, before any condition "
          f"{once['alerts_before_conditions']}")
    ev = res["evaluator"]
    print(f"  evaluator tick: p50 {ev['tick_ms'].get('p50')} ms, p95 {ev['tick_ms'].get('p95')}"
          f" ms, max {ev['tick_ms'].get('max')} ms (journal read of active alerts p50 "
          f"{ev['journal_active_ms'].get('p50')} ms)")
    print(f"  evaluator tick CPU: p50 {ev['tick_cpu_ms'].get('p50')} ms, p95 "
          f"{ev['tick_cpu_ms'].get('p95')} ms (journal read p50 "
          f"{ev['journal_active_cpu_ms'].get('p50')} ms)")
    for name, d in ev["sources_ms"].items():
        c = ev["sources_cpu_ms"].get(name, {})
        print(f"    source {name:<20} wall p50 {d.get('p50'):>7} ms p95 {d.get('p95'):>7} ms"
              f" | CPU p50 {c.get('p50'):>7} ms p95 {c.get('p95'):>7} ms")
    cpu = res["gateway_cpu_pct"]
    print(f"  gateway CPU: {cpu['on']} % with the evaluator, {cpu['off']} % without "
          f"(RSS {res['gateway_rss_mb']} MB)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--samples", type=int, default=50, help="conditions per kind")
    ap.add_argument("--dark", type=int, default=10, help="contexts that stop answering")
    ap.add_argument("--stagger", type=float, default=20.0, help="seconds the starts spread over")
    ap.add_argument("--grace", type=float, default=5.0)
    ap.add_argument("--stalled-after", type=float, default=15.0,
                    help="3 beat cadences: a loaded machine delays beats")
    ap.add_argument("--budget", type=float, default=3.0, help="poll budget (liveness)")
    ap.add_argument("--beat-every", type=float, default=5.0, help="each run beats this often")
    ap.add_argument("--cpu-seconds", type=float, default=20.0)
    ap.add_argument("--settle", type=float, default=15.0, help="wait after the last begins")
    ap.add_argument("--quick", action="store_true", help="2,000 runs, 10 per kind, short")
    ap.add_argument("--skip-backends", action="store_true", help="no real-server phase")
    ap.add_argument("--queues", default="1,10,50", help="Temporal: task queues to describe")
    ap.add_argument("--enqueued", type=int, default=1000, help="DBOS: rows enqueued")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.samples, args.dark, args.stagger = 2000, 10, 3, 5.0
        args.cpu_seconds, args.settle, args.queues, args.enqueued = 5.0, 6.0, "1,10", 200
    res: dict[str, Any] = {"gateway": gateway_phase(args)}
    print_table(res["gateway"])
    if not args.skip_backends:
        from benchmarks.alert_polling import polling_phase, print_polling

        res["polling"] = polling_phase([int(q) for q in args.queues.split(",")],
                                       args.enqueued)
        print_polling(res["polling"])
    res["versions"] = versions()
    if not args.no_write:
        write_results("alerts", res)


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("websockets", "pydantic", "httpx", "temporalio", "dbos"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


if __name__ == "__main__":
    main()
