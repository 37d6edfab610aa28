"""Frames encoded once for every client: events frames by (range, filter, beat form),
snapshots by filter (built and streamed page by page: snapshot_pages.py), and the sending
of a large frame in fragments.

At 20,000 beats/s and hundreds of clients the encoding, not the sending, is what costs: a
frame built for one client serves every other client asking for the same thing.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict

from console.gateway.beat_shedding import shed_marker
from console.gateway.hub import Event, Hub, lag_decision
from console.gateway.protocol import SubscriptionFilter
from console.gateway.snapshot_pages import SnapshotPages, encode_pages
from console.gateway.socket import GatewaySocket

SNAPSHOT_REUSE_S = 0.5  # an encoded snapshot serves every client asking within this time
SNAPSHOT_FRAGMENT = 256 * 1024  # a large snapshot goes out in fragments of this size
EVENTS_PER_FRAME = 5_000  # at most this many events in one events frame
FRAME_CACHE_BYTES = 8 << 20  # events frames kept for the clients that ask next


class SharedFrames:
    """The encoded ``events`` and ``snapshot`` frames of one hub, shared by its clients."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self._frames: OrderedDict[tuple[int, int, str, bool], bytes | None] = OrderedDict()
        #: frames with the beats shed (beat_shedding.py), and how many beats each left out
        self._shed_frames: OrderedDict[tuple[int, int, str, bool],
                                       tuple[bytes | None, int]] = OrderedDict()
        self._frame_bytes = 0
        self._snapshots: dict[str, SnapshotPages] = {}  # done, by filter key
        self._building: dict[str, SnapshotPages] = {}
        self._tasks: set[asyncio.Task[None]] = set()  # the builds (a reference each)

    def events_frame(self, events: list[Event], flt: SubscriptionFilter | None,
                     compact: bool, *, replay: bool = False) -> bytes | None:
        """One ``events`` frame, built once for every client with the same range, filter
        and beat form (each event itself is encoded once for all); None: nothing to send."""
        if not events:
            return None if not replay else self._join([], replay)
        fkey = flt.key if flt is not None else ""
        key = (events[0].seq, events[-1].seq, fkey, compact)
        if not replay and key in self._frames:
            return self._frames[key]
        parts = [e.compact() if compact else e.full() for e in events
                 if flt is None or flt.admits(e["kind"], e.scope)]
        frame = self._join(parts, replay) if parts or replay else None
        if not replay:
            self._frames[key] = frame
            self._frame_bytes += len(frame or b"")
            while self._frame_bytes > FRAME_CACHE_BYTES or len(self._frames) > 256:
                _key, old = self._frames.popitem(last=False)
                self._frame_bytes -= len(old or b"")
        return frame

    def shed_frame(self, first: int, last: int, events: list[Event],
                   flt: SubscriptionFilter | None, compact: bool) -> tuple[bytes | None, int]:
        """The ``events`` frame of a client that is behind, for the range ``first..last``
        of the log: its state events (``events``, EventLog.take_states) and, for each
        stretch between them, a ``shed`` marker standing for the heartbeat-only events
        there (beat_shedding.py); built once for every client with the same range, filter
        and beat form. Returns the frame (None: nothing to send) and the beats left out."""
        if last < first:
            return None, 0
        key = (first, last, flt.key if flt is not None else "", compact)
        cached = self._shed_frames.get(key)
        if cached is not None:
            return cached
        parts: list[bytes] = []
        shed, gap_from = 0, first
        for e in events:
            seq = e.seq
            if seq > gap_from:
                parts.append(shed_marker(gap_from, seq - 1, seq - gap_from))
                shed += seq - gap_from
            gap_from = seq + 1
            if flt is None or flt.admits(e["kind"], e.scope):
                parts.append(e.compact() if compact else e.full())
        if last >= gap_from:
            parts.append(shed_marker(gap_from, last, last - gap_from + 1))
            shed += last - gap_from + 1
        answer = (self._join(parts, False) if parts else None, shed)
        self._shed_frames[key] = answer
        while len(self._shed_frames) > 64:
            self._shed_frames.popitem(last=False)
        return answer

    def _join(self, parts: list[bytes], replay: bool) -> bytes:
        head = b'{"type":"events","epoch":"' + self.hub.epoch.encode() + b'",'
        if replay:
            head += b'"replay":true,'
        return head + b'"events":[' + b",".join(parts) + b"]}"

    async def snapshot_frame(self, flt: SubscriptionFilter | None, *,
                             shared: bool = False) -> tuple[int, SnapshotPages]:
        """(seq, the snapshot's pages): one encoding serves every client with the same
        filter for SNAPSHOT_REUSE_S while no event happened since, and clients asking while
        it is being built read the same pages as they are built (a reconnect storm builds
        it once; snapshot_pages.py). ``shared``: for a subscribing client (or a resync),
        which is sent the events after the snapshot's seq anyway: reused for
        SNAPSHOT_REUSE_S even when events happened since (at 20,000 beats/s a snapshot is
        never the newest one)."""
        key = flt.key if flt is not None else ""
        now = time.monotonic()
        cached = self._snapshots.get(key)
        first = self.hub.log[0]["seq"] if self.hub.log else None
        # reused only while nothing happened since it was built: a one-shot client (the CLI)
        # reads the snapshot and leaves, so an older one would show it a past state (an
        # interrupt still pending right after its approval was applied)
        if cached is not None and now - cached.finished_at < SNAPSHOT_REUSE_S \
                and (shared or cached.seq == self.hub.seq) and lag_decision(
                cached.seq, self.hub.seq, first, self.hub.max_lag // 2) != "resync":
            return cached.seq, cached
        building = self._building.get(key)
        if building is None:
            building = self._building[key] = self._start_build(flt, key)
        return building.seq, building

    def _start_build(self, flt: SubscriptionFilter | None, key: str) -> SnapshotPages:
        """The snapshot at the current seq, its pages encoded by a task of their own
        (snapshot_pages.encode_pages); filed for reuse once done."""
        now = self.hub.clock()
        head = self.hub.snapshot(now, flt, with_runs=False)
        build = SnapshotPages(int(head["seq"]))
        task = asyncio.ensure_future(encode_pages(
            build, head, self.hub.admitted_runs(flt),
            lambda run: self.hub.contract_bytes(run, now)))
        self._tasks.add(task)

        def done(task: asyncio.Task[None]) -> None:
            self._tasks.discard(task)
            self._building.pop(key, None)
            if build.error is None:
                self._snapshots[key] = build
                # dropped when it may no longer be reused: kept until the next build, the
                # last snapshot of each filter held its pages (75 MB at 100,000 runs) for
                # good; the clients still sending it hold it until they are done
                asyncio.get_running_loop().call_later(SNAPSHOT_REUSE_S, self._expire, key,
                                                      build)

        task.add_done_callback(done)
        return build

    def _expire(self, key: str, build: SnapshotPages) -> None:
        if self._snapshots.get(key) is build:
            del self._snapshots[key]


async def send_large(ws: GatewaySocket, frame: bytes | SnapshotPages | None) -> None:
    """A frame; a large one in fragments, so a slow reader holds one fragment in the
    write buffer, not a copy of the whole snapshot; a snapshot page by page as it is built
    (one message: its pages are the fragments)."""
    if frame is None:
        return
    if isinstance(frame, SnapshotPages):
        if frame.done and frame.error is None and len(frame.pages) == 1:
            frame = frame.pages[0]
        else:
            await ws.send(frame.read(), text=True)
            return
    if len(frame) <= SNAPSHOT_FRAGMENT:
        await ws.send(frame, text=True)
        return
    view = memoryview(frame)
    await ws.send((view[i:i + SNAPSHOT_FRAGMENT]
                   for i in range(0, len(frame), SNAPSHOT_FRAGMENT)), text=True)
