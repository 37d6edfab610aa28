"""``make screenshots``: the real app against the real demo fleet, captured as SVG and PNG.

    python -m tools.screenshots [--out screenshots] [--record tests/tui/data/fleet.json]

Starts ``irq serve`` and the DBOS demo fleet in a temporary IRQ_HOME, drives the console with
the keyboard at 80x24 and 160x48 and writes ``fleet``, ``inbox``, ``run-detail``,
``pause-confirm``, ``edit-invalid`` and ``native-wait`` (a purchase approval waiting in its own
``DBOS.recv``, selected in the inbox) screenshots. PNGs come from ``cairosvg`` when it is
installed, else from ``rsvg-convert`` (Debian ``librsvg2-bin``); without either only SVGs are
written (and it says so). ``--record`` also saves the fleet's data for the snapshot tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.model import DecisionKind, InterruptKind, RunState
from console.tui.app import IrqApp
from console.tui.fleet_source import LiveSource
from console.tui.screens.fleet import FleetScreen
from console.tui.screens.inbox import InboxScreen
from console.tui.screens.run_detail import RunDetailScreen
from console.tui.widgets.confirm_dialog import ConfirmDialog
from devtools.live_fleet import LiveFleet

SIZES = ((80, 24), (160, 48))


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def svg_to_png(svg: Path, png: Path) -> str | None:
    """Convert; None on success, else why not. Runs of spaces are kept (xml:space)."""
    text = svg.read_text()
    if 'xml:space="preserve"' not in text:
        text = text.replace("<svg ", '<svg xml:space="preserve" ', 1)
    with tempfile.NamedTemporaryFile("w", suffix=".svg", delete=False) as tmp:
        tmp.write(text)
    try:
        return _convert(Path(tmp.name), png)
    finally:
        Path(tmp.name).unlink(missing_ok=True)


def _convert(svg: Path, png: Path) -> str | None:
    try:
        import cairosvg  # type: ignore[import-not-found]
    except ImportError:
        cairosvg = None
    if cairosvg is not None:
        cairosvg.svg2png(url=str(svg), write_to=str(png), output_width=None, scale=1.5)
        return None
    tool = shutil.which("rsvg-convert")
    if tool:
        done = subprocess.run([tool, "-z", "1.5", "-o", str(png), str(svg)],
                              capture_output=True, text=True, check=False)
        return None if done.returncode == 0 else done.stderr.strip()
    return "no SVG converter: pip install cairosvg, or apt-get install librsvg2-bin"


async def until(pilot: Any, predicate: Callable[[], object], what: str,
                timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        await pilot.pause(0.2)
    raise RuntimeError(f"screenshots: timed out waiting for {what}")


async def capture(fleet: LiveFleet, size: tuple[int, int], out: Path) -> list[Path]:
    app = IrqApp(LiveSource(fleet.url, fleet.tokens["operator"]), context="demo",
                 ping_interval=1.0)
    written: list[Path] = []
    tag = f"{size[0]}x{size[1]}"

    def shot(name: str) -> None:
        path = out / f"{name}-{tag}.svg"
        path.write_text(app.export_screenshot(title=f"irq — {name}"))
        written.append(path)

    def refund() -> Any:
        return next((i for i in app.view.pending_interrupts()
                     if DecisionKind.EDIT in i.allowed_decisions and i.args_schema), None)

    def native() -> Any:
        return next((i for i in app.view.pending_interrupts()
                     if i.kind is InterruptKind.MESSAGE), None)

    def gpu_job() -> str | None:
        for run_id, row in app.index.rows.items():
            if row.state is RunState.RUNNING and row.run.resources and row.run.in_flight_step:
                return run_id
        return None

    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: len(app.view.pending_interrupts()) >= 3 and refund()
                    and gpu_job() and app.lag_s is not None, "interrupts and running runs")
        await pilot.pause(1.0)
        shot("fleet")
        await pilot.press("2")
        await until(pilot, lambda: isinstance(app.screen, InboxScreen), "inbox")
        await pilot.pause(0.5)
        shot("inbox")
        await pilot.press("1")
        run_id = gpu_job()
        fleet_screen = app.screen
        assert isinstance(fleet_screen, FleetScreen) and run_id
        fleet_screen.table.select(run_id)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen)
                    and app.screen.journal, "run detail with its journal")
        await pilot.pause(2.5)
        shot("run-detail")
        await pilot.press("escape")
        await pilot.pause(0.3)
        fleet_screen.table.select(run_id)
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "pause confirmation")
        await pilot.press(*["space" if c == " " else c for c in "GPU needed for the eval job"])
        await pilot.pause(0.3)
        shot("pause-confirm")
        await pilot.press("escape")
        intr = refund()
        await pilot.press("2")
        await until(pilot, lambda: isinstance(app.screen, InboxScreen), "inbox")
        inbox = app.screen
        assert isinstance(inbox, InboxScreen)
        inbox.table.move_cursor(row=inbox._shown.index(intr.id))  # noqa: SLF001
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "edit dialog")
        await pilot.press("down", "end", "left", "backspace", "backspace", "backspace",
                          "9", "9", "9", "9", "9", "9")
        await pilot.pause(0.5)
        shot("edit-invalid")
        await pilot.press("escape")
        await until(pilot, lambda: native() is not None, "a native wait (DBOS.recv)")
        await pilot.press("2")
        await until(pilot, lambda: isinstance(app.screen, InboxScreen), "inbox")
        inbox = app.screen
        assert isinstance(inbox, InboxScreen)
        wait = native()
        assert wait is not None
        await until(pilot, lambda: wait.id in inbox._shown, "the wait listed")  # noqa: SLF001
        inbox.table.move_cursor(row=inbox._shown.index(wait.id))  # noqa: SLF001
        await pilot.pause(0.5)
        shot("native-wait")
    return written


async def seed_audit(fleet: LiveFleet) -> None:
    """A few real commands, so the recording's audit trail is not empty."""
    from console.client import GatewayClient, GatewayError
    from console.model import Action, Decision

    async with GatewayClient(fleet.url, fleet.tokens["operator"], subscribe=False) as client:
        view = client.view
        running = [r.id for r in view.runs.values()
                   if r.state is RunState.RUNNING and r.resources]
        if running:
            await client.command(Action.PAUSE, running[:1], reason="GPU needed for the eval job")
            await asyncio.sleep(3)
            await client.command(Action.RESUME, running[:1], reason="eval job done")
        email = next((i for i in view.pending_interrupts() if i.action == "send_email"), None)
        if email is not None:
            await client.command(Action.DECIDE, [email.id], reason="wrong recipient list",
                                 decision=Decision(kind=DecisionKind.REJECT,
                                                   feedback="not before the renewal call"))
    async with GatewayClient(fleet.url, fleet.tokens["viewer"], subscribe=False) as viewer:
        target = next(iter(viewer.view.runs), None)
        if target:
            try:
                await viewer.command(Action.CANCEL, [target], reason="looks stuck")
            except GatewayError:
                pass
    await asyncio.sleep(2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.screenshots",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("screenshots"))
    parser.add_argument("--record", type=Path, help="also record the fleet's data here")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="irq-shots-") as tmp:
        say("screenshots: starting the gateway and the DBOS demo fleet")
        with LiveFleet(Path(tmp), agents=10, workers=2, showcase=True) as fleet:
            written: list[Path] = []
            for size in SIZES:
                say(f"screenshots: {size[0]}x{size[1]}")
                written += asyncio.run(capture(fleet, size, args.out))
            if args.record:
                from tools.recording import record

                asyncio.run(seed_audit(fleet))
                data = asyncio.run(record(fleet.url, fleet.tokens["operator"]))
                args.record.parent.mkdir(parents=True, exist_ok=True)
                args.record.write_text(json.dumps(data, indent=1, default=str) + "\n")
                say(f"screenshots: recorded the fleet to {args.record}")
    problem = None
    for svg in written:
        problem = svg_to_png(svg, svg.with_suffix(".png"))
        if problem:
            break
    for svg in written:
        say(f"  {svg}" + ("" if problem else f"  {svg.with_suffix('.png')}"))
    if problem:
        say(f"screenshots: SVG only ({problem})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
