"""Helpers to drive the console with Pilot against a live gateway."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from console.model import RunState
from console.tui.app import IrqApp
from console.tui.fleet_source import LiveSource
from devtools.live_fleet import LiveFleet

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 48), id="160x48")]


def live_app(fleet: LiveFleet, role: str = "operator", **kwargs: Any) -> IrqApp:
    return IrqApp(LiveSource(fleet.url, fleet.tokens[role]), context="test", **kwargs)


async def until(pilot: Any, predicate: Callable[[], object], what: str,
                timeout: float = 60.0) -> None:
    """Let the app run until ``predicate()`` is true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        await pilot.pause(0.1)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


async def type_text(pilot: Any, text: str) -> None:
    await pilot.press(*["space" if c == " " else c for c in text])


async def filter_list(pilot: Any, text: str) -> None:
    """``/`` TEXT Enter, as an operator types it."""
    await pilot.press("slash")
    await type_text(pilot, text)
    await pilot.press("enter")
    await pilot.pause(0.2)


def live_state(app: IrqApp, run_id: str) -> RunState | None:
    row = app.index.row(run_id)
    return row.state if row else None
