"""A gateway with a fault hook installed: the crash-safety tests start it instead of `irq serve`.

The shipped gateway has no fault injection; its ``CommandExecutor`` only calls a hook at named
points (``after_intent``: the intent is journaled, the backend not yet called) when one is
given (a retry also at ``before_outcome``: the backend answered, the outcome is not journaled).
This entry point gives one that SIGKILLs the process at the named point, so a test can check
what a restarted gateway does with the journaled intent.

    python tests/support/faulty_gateway.py --port PORT --backend URL [--crash-at after_intent]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable

from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings


def crash_at(point: str) -> Callable[[str], None]:
    """A fault hook that kills the gateway outright (no cleanup, like a power cut) at `point`."""

    def hook(name: str) -> None:
        if name == point:
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


async def serve(settings: GatewaySettings, hook: Callable[[str], None] | None) -> None:
    gateway = Gateway(settings, fault_hook=hook)
    await gateway.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await gateway.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--backend", action="append", default=[])
    parser.add_argument("--crash-at", default=None, help="SIGKILL the gateway at this point")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)-7s %(name)s: %(message)s")
    settings = GatewaySettings(host="127.0.0.1", port=args.port, backends=args.backend,
                               journal=os.environ.get("IRQ_JOURNAL", ""))
    asyncio.run(serve(settings, crash_at(args.crash_at) if args.crash_at else None))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
