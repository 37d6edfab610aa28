"""Frames encoded once for every client: events frames by (range, filter, beat form),
snapshots by filter, and the sending of a large frame in fragments.

At 20,000 beats/s and hundreds of clients the encoding, not the sending, is what costs: a
frame built for one client serves every other client asking for the same thing.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict

from console.gateway.hub import Event, Hub, lag_decision
from console.gateway.protocol import SubscriptionFilter, encode
from console.gateway.socket import GatewaySocket

SNAPSHOT_REUSE_S = 0.5  # an encoded snapshot serves every client asking within this time
SNAPSHOT_FRAGMENT = 256 * 1024  # a large snapshot goes out in fragments of this size
SNAPSHOT_CHUNK = 500  # runs encoded between two looks at the time ...
SNAPSHOT_SLICE_S = 0.05  # ... and the event loop let through after this long (a turn with
# the loop for every 500 runs gave a build under load less than half the CPU: it took longer
# than the event log reaches back, and the client was resynced at once)
EVENTS_PER_FRAME = 5_000  # at most this many events in one events frame
FRAME_CACHE_BYTES = 8 << 20  # events frames kept for the clients that ask next


class SharedFrames:
    """The encoded ``events`` and ``snapshot`` frames of one hub, shared by its clients."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self._frames: OrderedDict[tuple[int, int, str, bool], bytes | None] = OrderedDict()
        self._frame_bytes = 0
        self._snapshots: dict[str, tuple[float, int, bytes]] = {}
        self._building: dict[str, asyncio.Future[tuple[int, bytes]]] = {}

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

    def _join(self, parts: list[bytes], replay: bool) -> bytes:
        head = b'{"type":"events","epoch":"' + self.hub.epoch.encode() + b'",'
        if replay:
            head += b'"replay":true,'
        return head + b'"events":[' + b",".join(parts) + b"]}"

    async def snapshot_frame(self, flt: SubscriptionFilter | None, *,
                             shared: bool = False) -> tuple[int, bytes]:
        """(seq, encoded snapshot): one encoding serves every client with the same filter
        for SNAPSHOT_REUSE_S while no event happened since, and clients asking while it is
        being built wait for that build (a reconnect storm builds it once). ``shared``: for
        a subscribing client (or a resync), which is sent the events after the snapshot's
        seq anyway: reused for SNAPSHOT_REUSE_S even when events happened since (at 20,000
        beats/s a snapshot is never the newest one)."""
        key = flt.key if flt is not None else ""
        now = time.monotonic()
        cached = self._snapshots.get(key)
        first = self.hub.log[0]["seq"] if self.hub.log else None
        # reused only while nothing happened since it was built: a one-shot client (the CLI)
        # reads the snapshot and leaves, so an older one would show it a past state (an
        # interrupt still pending right after its approval was applied)
        if cached is not None and now - cached[0] < SNAPSHOT_REUSE_S \
                and (shared or cached[1] == self.hub.seq) and lag_decision(
                cached[1], self.hub.seq, first, self.hub.max_lag // 2) != "resync":
            return cached[1], cached[2]
        building = self._building.get(key)
        if building is None:
            building = asyncio.ensure_future(self._build_snapshot(flt))
            self._building[key] = building
            building.add_done_callback(lambda _f: self._building.pop(key, None))
        seq, frame = await asyncio.shield(building)
        self._snapshots[key] = (time.monotonic(), seq, frame)
        for old in [k for k, v in self._snapshots.items()
                    if time.monotonic() - v[0] >= SNAPSHOT_REUSE_S]:
            del self._snapshots[old]
        return seq, frame

    async def _build_snapshot(self, flt: SubscriptionFilter | None) -> tuple[int, bytes]:
        """The snapshot at the current seq, its runs encoded in chunks of SNAPSHOT_CHUNK
        with the event loop let through between them: 100,000 runs take over a second of
        CPU, which must not stop the agents and the other clients. A run changed during the
        build is encoded as it is then; the events after ``seq`` follow anyway."""
        now = self.hub.clock()
        head = self.hub.snapshot(now, flt, with_runs=False)
        runs = self.hub.admitted_runs(flt)
        encoded = encode(head)
        at = encoded.index(b'"runs":[]') + len(b'"runs":[')
        parts: list[bytes] = [encoded[:at]]  # the runs, a comma after each but the last
        turn = time.monotonic()
        for i in range(0, len(runs), SNAPSHOT_CHUNK):
            for r in runs[i:i + SNAPSHOT_CHUNK]:
                parts += (self.hub.contract_bytes(r, now), b",")
            if time.monotonic() - turn >= SNAPSHOT_SLICE_S:
                await asyncio.sleep(0)
                turn = time.monotonic()
        if len(parts) > 1:
            parts.pop()
        parts.append(encoded[at:])
        # one join: the frame is built once (~75 MB at 100,000 runs), not copied again
        return int(head["seq"]), b"".join(parts)


async def send_large(ws: GatewaySocket, frame: bytes | None) -> None:
    """A frame; a large one in fragments, so a slow reader holds one fragment in the
    write buffer, not a copy of the whole snapshot."""
    if frame is None:
        return
    if len(frame) <= SNAPSHOT_FRAGMENT:
        await ws.send(frame, text=True)
        return
    view = memoryview(frame)
    await ws.send((view[i:i + SNAPSHOT_FRAGMENT]
                   for i in range(0, len(frame), SNAPSHOT_FRAGMENT)), text=True)
