"""A client's session on ``/`` (viewer, operator, admin): hello and welcome, the first
frame (a replay or a snapshot), its subscription flushed by its own task, and its requests
read under the connection's and the identity's frame budgets."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter

from console.gateway.auth import Principal
from console.gateway.beat_shedding import BeatShedding
from console.gateway.budgets import IdentityBuckets, TokenBucket
from console.gateway.client_requests import ClientRequests
from console.gateway.gateway_metrics import FrameCounts
from console.gateway.hello import await_hello
from console.gateway.hub import Hub, Subscriber
from console.gateway.protocol import (
    PROTOCOL_VERSION,
    FrameError,
    decode_json,
    dumps,
    error_frame,
    parse_client_frame,
)
from console.gateway.refusals import RefusalLedger
from console.gateway.settings import GatewaySettings
from console.gateway.shared_frames import EVENTS_PER_FRAME, SharedFrames, send_large
from console.gateway.snapshot_pages import SnapshotPages
from console.gateway.socket import GatewaySocket, Message

SERVER_NAME = "irq-gateway/0.1"


class ClientSessions:
    """Runs each client connection from its hello to its close."""

    def __init__(self, settings: GatewaySettings, hub: Hub, frames: SharedFrames,
                 requests: ClientRequests, refusals: RefusalLedger,
                 counters: Counter[str], shedding: BeatShedding, *,
                 counts: FrameCounts | None = None) -> None:
        """``shedding``: whether a client that fell behind is sent its state changes only;
        ``counts``: frames received and sent, by type (for ``/metrics``)."""
        self.settings, self.hub, self.frames, self.requests = settings, hub, frames, requests
        self.refusals, self.counters, self.shedding = refusals, counters, shedding
        self.counts = counts if counts is not None else FrameCounts()
        self.identity_budget = IdentityBuckets(settings.client_identity_frames_per_s,
                                               settings.client_identity_frames_burst)

    async def session(self, ws: GatewaySocket, who: Principal) -> None:
        hello = await await_hello(ws, parse_client_frame, self.settings.max_frame_bytes)
        if hello is None:
            return
        await ws.send(dumps({
            "type": "welcome", "protocol": PROTOCOL_VERSION, "server": SERVER_NAME,
            "identity": who.identity, "role": who.role.value, "epoch": self.hub.epoch,
            "seq": self.hub.seq,
            "max_frame_bytes": self.settings.max_frame_bytes,
            "prices": self.settings.prices.contract(),  # the fleet's cost sort (prices.py)
        }))
        self.counts.got("client", hello)
        self.counts.sent["welcome"] += 1
        wake = asyncio.Event()
        sub: Subscriber | None = None
        flusher: asyncio.Task[None] | None = None
        flt, compact = hello.filter, hello.beats == "compact"
        replay = None
        first: bytes | SnapshotPages | None
        if hello.since is not None and hello.epoch == self.hub.epoch:
            replay = self.hub.events_since(hello.since)
        if replay is not None:
            # the first frame of the replay now (its replay flag tells the client it is
            # current up to there), the rest through the flusher, in frames shared with
            # the clients that resume from the same place
            replay = replay[:EVENTS_PER_FRAME]
            cursor = replay[-1].seq if replay else self.hub.seq
            first = self.frames.events_frame(replay, flt, compact, replay=True)
        elif hello.snapshot or hello.subscribe:
            cursor, first = await self.frames.snapshot_frame(flt, shared=hello.subscribe)
        else:  # a one-shot client that asks for what it needs
            cursor, first = self.hub.seq, None
        if hello.subscribe:
            sub = Subscriber(wake=wake.set, cursor=cursor, filter=flt, compact_beats=compact)
            self.hub.subscribers.add(sub)
        try:
            await send_large(ws, first)
            if first is not None:
                self.counts.sent["events" if replay is not None else "snapshot"] += 1
            # let the first frame go: this session lasts as long as the client stays, and
            # a snapshot of 100,000 runs is 75 MB
            first = replay = None
            if sub is not None:
                if sub.cursor < self.hub.seq:  # the rest of a replay
                    sub.urgent = True
                    wake.set()
                flusher = asyncio.create_task(self.flush(ws, sub, wake))
            await self._requests(ws, who)
        finally:
            if sub is not None:
                self.hub.subscribers.discard(sub)
            if flusher is not None:
                flusher.cancel()

    async def _requests(self, ws: GatewaySocket, who: Principal) -> None:
        """Read the client's frames until it closes; each request answered by its own task,
        at most ``client_inflight`` at once (backpressure), all cancelled at the close."""
        tasks: set[asyncio.Task[None]] = set()
        budget = TokenBucket(self.settings.client_frames_per_s, self.settings.client_frames_burst)
        slots = asyncio.Semaphore(self.settings.client_inflight)
        try:
            async for raw in ws:
                if not (budget.take() and self.identity_budget.take(who.identity)):
                    self.counters["client_rate_limited"] += 1
                    self.counts.refused("client")
                    self.refusals.refuse(
                        identity=who.identity, role=who.role.value, action="frame", target="",
                        code="rate_limited", detail=f"more than {budget.rate:g} frames/s on one "
                        f"connection or {self.identity_budget.rate:g} for the identity")
                    await ws.send(error_frame(
                        "rate_limited", f"over {budget.rate:g} frames/s (burst "
                        f"{budget.burst:g}) on this connection or "
                        f"{self.identity_budget.rate:g} for {who.identity}; slow down",
                        _frame_id(raw)))
                    continue
                try:
                    msg = parse_client_frame(raw, self.settings.max_frame_bytes)
                except FrameError as exc:
                    self.counts.refused("client")
                    await ws.send(error_frame(exc.code, exc.message, exc.ref))
                    continue
                self.counts.got("client", msg)
                await slots.acquire()  # at most client_inflight answers at once: backpressure
                task = asyncio.create_task(self.requests.handle(ws, who, msg))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                task.add_done_callback(lambda _t: slots.release())
        finally:
            for task in tasks:
                task.cancel()

    async def flush(self, ws: GatewaySocket, sub: Subscriber, wake: asyncio.Event) -> None:
        """:meth:`_flush` until the client goes away: a send cut short by its close ends
        the flusher quietly (the session ends with its read loop); it was left as a task's
        unretrieved exception, logged with a traceback at every client's close."""
        try:
            await self._flush(ws, sub, wake)
        except Exception as exc:
            from websockets.exceptions import ConnectionClosed

            if not isinstance(exc, ConnectionClosed):
                raise

    async def _flush(self, ws: GatewaySocket, sub: Subscriber, wake: asyncio.Event) -> None:
        """Send a subscriber what the hub published after its cursor: state events within
        ``state_flush_s``, beats batched every ``flush_interval_s``. One send at a time:
        a client that does not read blocks only its own flusher, its cursor stays behind;
        more than ``shed_after_s`` behind it is sent its backlog's state changes without
        the beats (beat_shedding.py), and past ``max_client_lag`` events (or off the log)
        it gets a fresh snapshot instead of the backlog."""
        while True:
            await wake.wait()
            if not sub.urgent:
                # beats wait up to flush_interval_s; a state event published meanwhile cuts
                # the wait short (it waited out the whole interval behind the beats: state
                # changes reached clients ~100 ms late at 20,000 beats/s)
                wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(_until_urgent(sub, wake),
                                           self.settings.flush_interval_s)
            if sub.urgent:
                await asyncio.sleep(self.settings.state_flush_s)
            wake.clear()
            sub.urgent = False
            while True:
                if self.shedding.judge(sub):
                    sent = await self._send_shed(ws, sub)
                else:
                    sent = await self._send_events(ws, sub)
                if sent is None:  # too far behind: a fresh snapshot instead
                    sub.resyncs += 1
                    self.counters["client_resyncs"] += 1
                    sub.cursor, snapshot = await self.frames.snapshot_frame(sub.filter,
                                                                            shared=True)
                    await send_large(ws, snapshot)
                    self.counts.sent["snapshot"] += 1
                    continue
                if sent < EVENTS_PER_FRAME:
                    break

    async def _send_events(self, ws: GatewaySocket, sub: Subscriber) -> int | None:
        """The next events after ``sub``'s cursor in one frame; how many (None: resync)."""
        events = self.hub.take(sub, EVENTS_PER_FRAME)
        if events is None:
            return None
        await self._send(ws, self.frames.events_frame(events, sub.filter, sub.compact_beats))
        return len(events)

    async def _send_shed(self, ws: GatewaySocket, sub: Subscriber) -> int | None:
        """``sub`` is behind: the state events after its cursor and shed markers for the
        beats between them, in one frame; how many state events (None: resync)."""
        taken = self.hub.events.take_states(sub, EVENTS_PER_FRAME)
        if taken is None:
            return None
        first, last, events = taken
        frame, shed = self.frames.shed_frame(first, last, events, sub.filter,
                                             sub.compact_beats)
        self.shedding.shed += shed
        await self._send(ws, frame)
        return len(events)

    async def _send(self, ws: GatewaySocket, frame: bytes | None) -> None:
        if frame is not None:
            await ws.send(frame, text=True)
            self.counts.sent["events"] += 1


async def _until_urgent(sub: Subscriber, wake: asyncio.Event) -> None:
    """Until a state event waits for ``sub`` (each wake of the hub is checked)."""
    while not sub.urgent:
        await wake.wait()
        wake.clear()


def _frame_id(raw: Message) -> str | None:
    """The ``id`` of a frame refused before parsing, when it is cheap to find."""
    if len(raw) > 4096:
        return None
    try:
        data = decode_json(raw)
    except (ValueError, RecursionError):
        return None
    ref = data.get("id") if isinstance(data, dict) else None
    return ref if isinstance(ref, str) and len(ref) <= 128 else None
