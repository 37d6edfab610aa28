"""``--wait SECONDS``: after an action or a decision, block until its effect is observed on
the client's live subscription (the gateway's events), with a progress line on a terminal
and plain lines otherwise.

What counts as the effect, per target:

- pause: the run is ``paused`` -- the gateway shows ``pausing`` until the agent confirmed the
  planned releases (its ``notice``), so ``paused`` means confirmed; a planned release that
  turned into a suspected leak is a failure;
- cancel / terminate: the run is in a terminal state (or gone from the index);
- resume: the run is running again (``running`` or ``waiting``; ``completed`` counts too);
- retry: the same for the run that carries the work (the new run after a fork, which may
  not be in the view yet when the command answers);
- decide: the interrupt is no longer pending (decided or withdrawn: consumed).

Targets still short of their effect when the time is up are ``timed out`` (exit 7).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from console.cli.exits import ExitCode, diagnose, fail
from console.cli.options import DEFAULT_WAIT_S
from console.cli.output import OutputFormat, esc, make_table, print_table, styled

if TYPE_CHECKING:
    from console.client import FleetView, GatewayClient
    from console.model import CommandResult, Run

T = TypeVar("T")


def bare_wait(argv: list[str]) -> list[str]:
    """``argv`` with a bare ``--wait`` (last, or followed by anything but a number) given
    :data:`DEFAULT_WAIT_S` (click options cannot take an optional value). Words after ``--``
    are left alone."""
    out: list[str] = []
    for i, word in enumerate(argv):
        if word == "--":
            return out + argv[i:]
        out.append(word)
        if word == "--wait":
            following = argv[i + 1] if i + 1 < len(argv) else None
            if following is None or not _is_number(following):
                out.append(f"{DEFAULT_WAIT_S:g}")
    return out


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


#: what the progress line calls a target that reached its effect
DONE_WORD = {
    "pause": "paused",
    "resume": "running",
    "cancel": "ended",
    "terminate": "ended",
    "decide": "consumed",
    "retry": "running",
}


@dataclass
class Waited:
    """The outcome of waiting for one target."""

    target: str
    outcome: str  # the done word, "timed out", or a failure word ("leak suspected", ...)
    ok: bool
    state: str  # the run's state (or the interrupt's status) last seen
    seconds: float | None = None  # when the effect was observed, after the command

    def contract(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "outcome": self.outcome,
            "ok": self.ok,
            "state": self.state,
            "seconds": self.seconds,
        }


def check_target(view: FleetView, action: str, target: str) -> Waited | None:
    """The effect as the view shows it now: a final :class:`Waited`, or None (not yet)."""
    from console.model import RunState

    done = DONE_WORD[action]
    if action == "decide":
        intr = view.interrupts.get(target)
        if intr is None:
            return Waited(target, done, True, "gone")
        return None if intr.status == "pending" else Waited(target, done, True, intr.status)
    run = view.runs.get(target)
    if run is None and action == "retry":
        return None  # a new run shows up with the gateway's next event about it
    if run is None:
        ended = action in ("cancel", "terminate")
        return Waited(target, done if ended else "gone", ended, "gone")
    state = run.state
    if action == "pause":
        if state is RunState.PAUSED:
            leaked = [r.id for r in run.resources if r.state == "suspected_leak"]
            if leaked:
                return Waited(target, "leak suspected: " + ", ".join(leaked), False, state.value)
            return Waited(target, done, True, state.value)
        if state.terminal:
            return Waited(target, f"ended {state.value}", False, state.value)
        return None
    if action in ("cancel", "terminate"):
        if state.terminal:
            leaked = [r.id for r in run.resources if r.state == "suspected_leak"]
            if leaked and action == "cancel":
                return Waited(target, "leak suspected: " + ", ".join(leaked), False, state.value)
            return Waited(target, done, True, state.value)
        return None
    # resume, retry
    if state in (RunState.RUNNING, RunState.WAITING, RunState.COMPLETED):
        return Waited(target, done, True, state.value)
    if state.terminal:
        return Waited(target, f"ended {state.value}", False, state.value)
    return None


def _last_state(view: FleetView, action: str, target: str) -> str:
    if action == "decide":
        intr = view.interrupts.get(target)
        return intr.status if intr is not None else "gone"
    run = view.runs.get(target)
    return run.state.value if run is not None else "gone"


class Progress:
    """A live line on a terminal (stderr), plain lines otherwise."""

    def __init__(self, action: str, total: int) -> None:
        self.action = action
        self.total = total
        self.live: Any = None
        if sys.stderr.isatty():
            from rich.live import Live

            from console.cli.output import stderr_console

            self.live = Live("", console=stderr_console(), transient=True, auto_refresh=False)
            self.live.start()

    def update(self, finished: dict[str, Waited]) -> None:
        if self.live is None:
            return
        ok = sum(1 for w in finished.values() if w.ok)
        failed = len(finished) - ok
        waiting = self.total - len(finished)
        line = f"{ok}/{self.total} {DONE_WORD[self.action]}"
        if failed:
            line += f", {failed} failed"
        if waiting:
            line += f", {waiting} waiting…"
        self.live.update(line, refresh=True)

    def finished(self, waited: Waited) -> None:
        if self.live is None:
            diagnose(f"{waited.target}: {waited.outcome} ({waited.state})")

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()


#: a run's state and its failure's time and message: what a retry in place must change
RunMark = tuple[str, "datetime | None", str]


def run_mark(run: Run) -> RunMark:
    """What tells a run after a retry in place from the same run before it."""
    error = run.error
    return (run.state.value, error.at if error else None, error.message if error else "")


def in_place_marks(results: Iterable[CommandResult],
                   before: Mapping[str, RunMark]) -> dict[str, RunMark]:
    """The marks from ``before`` (each run as the view showed it before a retry) of the
    runs retried in place: only such a run can still show its state from before. A new run
    (a fork) is the retry's effect whatever state it is in -- a retry re-driven after a
    gateway's crash may have forked and completed before the command that asks for its
    outcome -- and so is whatever a replayed retry shows now."""
    return {r.target: before[r.target] for r in results
            if r.outcome == "applied" and not r.replayed and r.target in before
            and (r.new_run_id or r.target) == r.target}


async def wait_for_effects(
    client: GatewayClient, action: str, targets: Iterable[str], timeout_s: float,
    *, seen_before: Mapping[str, RunMark] | None = None,
) -> list[Waited]:
    """Watch the client's subscription until every target shows its effect or time is up.

    ``seen_before``: a target's run as the view showed it before the command (its
    :func:`run_mark`); while the view still shows that state and that failure it is not the
    command's effect. A retry that keeps the run's id (a Temporal reset) answers before the
    delta with the new run reaches the client, and a poll may touch the replaced run again in
    between (a new ``updated_at``, the same failure), so the failed state from before is no
    outcome until the state or the failure itself changed."""
    import asyncio

    loop = asyncio.get_running_loop()
    start = loop.time()
    pending = list(dict.fromkeys(targets))
    finished: dict[str, Waited] = {}
    progress = Progress(action, len(pending))

    def sweep() -> None:
        for target in list(pending):
            run = client.view.runs.get(target)
            if seen_before and run is not None and run_mark(run) == seen_before.get(target):
                continue  # the run as it was before the command
            waited = check_target(client.view, action, target)
            if waited is not None:
                waited.seconds = round(loop.time() - start, 2)
                finished[target] = waited
                pending.remove(target)
                progress.finished(waited)
        progress.update(finished)

    try:
        sweep()
        while pending:
            left = timeout_s - (loop.time() - start)
            if left <= 0:
                break
            try:
                batch = await asyncio.wait_for(client.updates(), min(left, 1.0))
            except TimeoutError:
                continue
            if batch is None:
                diagnose("the connection to the gateway closed while waiting")
                break
            sweep()
    finally:
        progress.stop()
    for target in pending:
        state = _last_state(client.view, action, target)
        finished[target] = Waited(target, "timed out", False, state)
        if progress.live is None:
            diagnose(f"{target}: timed out after {timeout_s:g}s ({state})")
    order = {t: i for i, t in enumerate(dict.fromkeys(targets))}
    return sorted(finished.values(), key=lambda w: order[w.target])


def code_for_waits(waited: list[Waited]) -> ExitCode:
    """0 when every effect was observed; 7 when any timed out; else 1."""
    if any(w.outcome == "timed out" for w in waited):
        return ExitCode.TIMED_OUT
    if any(not w.ok for w in waited):
        return ExitCode.FAILED
    return ExitCode.OK


def print_waits(waited: list[Waited], fmt: OutputFormat) -> None:
    """The table of observed effects (text only: json/jsonl carry them with the results)."""
    if fmt is not OutputFormat.TEXT or not waited:
        return
    table = make_table("target", "observed", "state", "after")
    for w in waited:
        outcome = styled("applied" if w.ok else "failed") if w.outcome else ""
        after = f"{w.seconds:.1f}s" if w.seconds is not None else "-"
        table.add_row(esc(w.target), f"{outcome} {esc(w.outcome)}", styled(w.state), after)
    print_table(table)


def refuse_bad_wait(wait_s: float | None) -> None:
    if wait_s is not None and wait_s <= 0:
        fail(ExitCode.USAGE, "--wait needs a positive number of seconds")
