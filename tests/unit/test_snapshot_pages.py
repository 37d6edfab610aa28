"""A snapshot built page by page (console/gateway/snapshot_pages.py): clients reading while it
is built get the same message as a client reading it done, and a failed build fails them."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from console.gateway import snapshot_pages
from console.gateway.snapshot_pages import SnapshotPages, encode_pages


def _head(seq: int) -> dict[str, Any]:
    return {"type": "snapshot", "epoch": "e", "seq": seq, "runs": [], "interrupts": [],
            "backends": [{"key": "b:l"}]}


async def _read_all(build: SnapshotPages) -> tuple[bytes, int]:
    pages = [page async for page in build.read()]
    return b"".join(pages), len(pages)


@pytest.mark.parametrize("count", [0, 1, 7, 1000])
async def test_readers_during_the_build_get_the_whole_snapshot(
        monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    monkeypatch.setattr(snapshot_pages, "SNAPSHOT_PAGE_RUNS", 3)
    monkeypatch.setattr(snapshot_pages, "SNAPSHOT_SLICE_S", 0.0)  # the loop let through often
    runs: Any = [f"r{i}" for i in range(count)]
    build = SnapshotPages(41)
    early = asyncio.create_task(_read_all(build))  # waits for pages not yet built
    await asyncio.sleep(0)
    task = asyncio.create_task(encode_pages(
        build, _head(41), runs, lambda r: json.dumps({"id": r}).encode()))
    middle = asyncio.create_task(_read_all(build))
    await task
    (first, pages), (second, _) = await early, await middle
    assert first == second == await build.frame()
    assert pages == max(1, -(-count // 3))  # a page per 3 runs, the head in the first
    assert json.loads(first) == {**_head(41), "runs": [{"id": r} for r in runs]}
    assert build.done and build.error is None and build.seq == 41


async def test_a_failed_build_fails_its_readers() -> None:
    def broken(run: Any) -> bytes:
        raise ValueError("cannot encode")

    build = SnapshotPages(1)
    reader = asyncio.create_task(_read_all(build))
    await asyncio.sleep(0)
    with pytest.raises(ValueError):
        await encode_pages(build, _head(1), ["r"], broken)
    with pytest.raises(ValueError):
        await reader
