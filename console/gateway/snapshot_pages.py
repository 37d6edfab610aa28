"""A snapshot encoded page by page, streamed to its clients while it is being built.

A snapshot of 100,000 runs is ~75 MB and over a second of the event loop's CPU. It was built
whole (in time slices), joined, and only then sent: the client waited for the build, then for
the transfer. Now each page goes out as a fragment of the one ``snapshot`` message as soon as
it is encoded (the wire is unchanged: a client still receives one text message), so the
transfer overlaps the build; every client asking meanwhile reads the same pages, and the
finished build serves the clients that ask within ``SNAPSHOT_REUSE_S`` (shared_frames.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from console.gateway.protocol import encode
from console.run_record import RunRecord

SNAPSHOT_PAGE_RUNS = 300  # runs per page (~225 KB at 750 bytes a run): one fragment each
SNAPSHOT_SLICE_S = 0.02  # the event loop let through after this long (a turn with the loop
# for every chunk gave a build under load less than half the CPU: it took longer than the
# event log reaches back, and the client was resynced at once)


class SnapshotPages:
    """One snapshot at ``seq``: its pages so far, readable by any number of clients while
    the build adds to them (:meth:`read`), and the whole frame once done (:meth:`frame`)."""

    def __init__(self, seq: int) -> None:
        self.seq = seq
        self.pages: list[bytes] = []
        self.done = False
        self.finished_at = 0.0  # time.monotonic() when done
        self.error: BaseException | None = None
        self._grown = asyncio.Event()

    def add(self, page: bytes) -> None:
        self.pages.append(page)
        self._grown.set()

    def finish(self, error: BaseException | None = None) -> None:
        self.done, self.error, self.finished_at = True, error, time.monotonic()
        self._grown.set()

    async def read(self) -> AsyncIterator[bytes]:
        """The pages in order, each as soon as it is built; raises the build's error."""
        i = 0
        while True:
            while i < len(self.pages):
                yield self.pages[i]
                i += 1
            if self.done:
                if self.error is not None:
                    raise self.error
                return
            # no await between the check above and the wait: a page added later sets it
            self._grown.clear()
            await self._grown.wait()

    async def frame(self) -> bytes:
        """The whole snapshot, once built."""
        return b"".join([page async for page in self.read()])


async def encode_pages(build: SnapshotPages, head: dict[str, Any], runs: Sequence[RunRecord],
                       encoded: Callable[[RunRecord], bytes]) -> None:
    """Fill ``build``: ``head`` (a snapshot with ``runs`` empty) with ``runs`` encoded by
    ``encoded`` spliced in, SNAPSHOT_PAGE_RUNS a page, the event loop let through every
    SNAPSHOT_SLICE_S (the agents and the other clients must not wait for 100,000 runs; the
    clients reading ``build`` send each page meanwhile). A run changed during the build is
    encoded as it is then; the events after ``build.seq`` follow anyway."""
    try:
        text = encode(head)
        at = text.index(b'"runs":[]') + len(b'"runs":[')
        page: list[bytes] = [text[:at]]
        turn = time.monotonic()
        for i in range(0, len(runs), SNAPSHOT_PAGE_RUNS):
            if i:
                page.append(b",")
            page.append(b",".join([encoded(r) for r in runs[i:i + SNAPSHOT_PAGE_RUNS]]))
            if i + SNAPSHOT_PAGE_RUNS < len(runs):
                build.add(b"".join(page))
                page = []
            if time.monotonic() - turn >= SNAPSHOT_SLICE_S:
                await asyncio.sleep(0)
                turn = time.monotonic()
        page.append(text[at:])
        build.add(b"".join(page))
    except BaseException as exc:
        build.finish(exc)
        raise
    build.finish()

