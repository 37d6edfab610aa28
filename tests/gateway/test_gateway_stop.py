"""Stopping a gateway ends every background task, even one whose first cancellation was lost.

Python 3.11's ``asyncio.wait_for`` can swallow a cancellation that arrives as its inner call
completes (seen here as a poll loop that went back to sleep during ``stop()`` and hung a test
teardown): ``stop()`` cancels again until each task is done."""

from __future__ import annotations

import asyncio
import contextlib

from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings


async def _loses_one_cancellation() -> None:
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.sleep(3600)  # the lost cancellation
    while True:
        await asyncio.sleep(10)  # what the poll loop did next


async def test_stop_ends_a_task_that_swallowed_its_first_cancellation(tmp_path):
    gw = Gateway(GatewaySettings(port=0, home=tmp_path))
    await gw.start()
    stubborn = asyncio.create_task(_loses_one_cancellation())
    gw._tasks.append(stubborn)
    await asyncio.sleep(0)  # let it reach its first sleep
    stopper = asyncio.create_task(gw.stop())
    done, _ = await asyncio.wait({stopper}, timeout=20)  # no cancellation from the test
    if not done:  # before the fix: stop() waited on the stubborn task for good
        stubborn.cancel()
        await stopper
    assert done and stubborn.cancelled()
