"""Building blocks shared by the Temporal adapter tests: agent parameters, waiting for states."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from backend_adapters.temporal.adapter import TemporalBackend
from console.model import Run

HEARTBEAT_TIMEOUT_S = 3.0


def train_params(tmp_path: Path, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "lock_path": str(tmp_path / f"{name}.lock"),
        "report_dir": str(tmp_path),
        "heartbeat_timeout_s": HEARTBEAT_TIMEOUT_S,
        "cadence_s": 0.5,
        "step_s": 0.1,
        **extra,
    }


async def wait_run(
    adapter: TemporalBackend, wid: str, predicate: Any, timeout: float = 15.0
) -> Run:
    deadline = time.monotonic() + timeout
    last: Run | None = None
    while time.monotonic() < deadline:
        obs = await adapter.observe()
        for run in obs.runs:
            if run.native_id == wid:
                last = run
                if predicate(run):
                    return run
        await asyncio.sleep(0.1)
    raise AssertionError(f"{wid}: condition not met; last seen: {last and last.contract()}")
