"""A snapshot's encoding serves the clients asking within the reuse window, then is let go."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest

from console.gateway import shared_frames
from console.gateway.hub import Hub
from console.gateway.shared_frames import SharedFrames
from console.model import Run, RunState


def _runs(n: int) -> list[Run]:
    now = datetime.now(UTC)
    return [Run(id=f"dbos:prod/wf-{i}", backend="dbos", context="prod", native_id=f"wf-{i}",
                name="nightly", state=RunState.RUNNING, started_at=now) for i in range(n)]


async def test_a_snapshot_is_reused_within_the_window_and_then_released(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared_frames, "SNAPSHOT_REUSE_S", 0.2)
    hub = Hub()
    hub.observe_runs(_runs(700))  # three pages
    frames = SharedFrames(hub)
    seq, build = await frames.snapshot_frame(None, shared=True)
    whole = json.loads(await build.frame())
    assert {r["id"] for r in whole["runs"]} == {f"dbos:prod/wf-{i}" for i in range(700)}
    await asyncio.sleep(0)  # the build's done callback
    again_seq, again = await frames.snapshot_frame(None, shared=True)
    assert again is build and again_seq == seq  # a client asking within the window
    await asyncio.sleep(0.4)
    # past the window nobody can be served it: its pages are not kept (they were, until
    # the next snapshot of the same filter: 75 MB at 100,000 runs)
    assert frames._snapshots == {}
    _, fresh = await frames.snapshot_frame(None, shared=True)
    assert fresh is not build
    assert len(json.loads(await fresh.frame())["runs"]) == 700
