"""A snapshot's encoding serves the clients asking within the reuse window, then is let go."""

from __future__ import annotations

import asyncio
import gc
import json
import time
import weakref
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect

from console.gateway import shared_frames
from console.gateway.auth import create_token
from console.gateway.hub import Hub
from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings
from console.gateway.shared_frames import SharedFrames
from console.gateway.snapshot_pages import SnapshotPages
from console.model import Role, Run, RunState


def _runs(n: int) -> list[Run]:
    now = datetime.now(UTC)
    return [Run(id=f"dbos:prod/wf-{i}", backend="dbos", context="prod", native_id=f"wf-{i}",
                name="nightly", state=RunState.RUNNING, started_at=now) for i in range(n)]


async def test_a_snapshot_is_reused_within_the_window_and_then_released(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared_frames, "SNAPSHOT_REUSE_S", 1.0)  # room on a loaded machine
    hub = Hub()
    hub.observe_runs(_runs(700))  # three pages
    frames = SharedFrames(hub)
    seq, build = await frames.snapshot_frame(None, shared=True)
    whole = json.loads(await build.frame())
    assert {r["id"] for r in whole["runs"]} == {f"dbos:prod/wf-{i}" for i in range(700)}
    await asyncio.sleep(0)  # the build's done callback
    again_seq, again = await frames.snapshot_frame(None, shared=True)
    assert again is build and again_seq == seq  # a client asking within the window
    await asyncio.sleep(1.5)
    # past the window nobody can be served it: its pages are not kept (they were, until
    # the next snapshot of the same filter: 75 MB at 100,000 runs)
    assert frames._snapshots == {}
    _, fresh = await frames.snapshot_frame(None, shared=True)
    assert fresh is not build
    assert len(json.loads(await fresh.frame())["runs"]) == 700


async def test_a_connected_client_does_not_keep_its_first_snapshot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The session of a client lasts as long as it stays connected: the snapshot it was sent
    first must not live as long (75 MB at 100,000 runs, per filter)."""
    monkeypatch.setenv("IRQ_HOME", str(tmp_path))
    monkeypatch.setattr(shared_frames, "SNAPSHOT_REUSE_S", 0.1)
    token = create_token(Role.VIEWER, "viewer-test", tmp_path)
    gw = Gateway(GatewaySettings(port=0, home=tmp_path))
    await gw.start()
    builds: list[weakref.ref[SnapshotPages]] = []
    start_build = gw.clients.frames._start_build

    def watched(flt: Any, key: str) -> SnapshotPages:
        build = start_build(flt, key)
        builds.append(weakref.ref(build))
        return build

    monkeypatch.setattr(gw.clients.frames, "_start_build", watched)
    try:
        gw.hub.observe_runs(_runs(700))
        async with connect(f"ws://127.0.0.1:{gw.port}", max_size=None,
                           additional_headers={"Authorization": f"Bearer {token}"}) as ws:
            await ws.send(json.dumps({"type": "hello", "protocol": 1, "beats": "compact"}))
            assert json.loads(await ws.recv())["type"] == "welcome"
            assert len(json.loads(await ws.recv())["runs"]) == 700
            assert len(builds) == 1
            deadline = time.monotonic() + 10
            while builds[0]() is not None:  # still connected, subscribed
                assert time.monotonic() < deadline, "the session still holds its snapshot"
                gc.collect()
                await asyncio.sleep(0.05)
    finally:
        await gw.stop()
