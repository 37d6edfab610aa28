"""``irq drill``: preempt runs on purpose and prove they recover cleanly.

For each selected run (active, beating; by default one per backend) the context's
``preempt_command`` preempts its agent (irq never kills a process it did not start); the
live gateway subscription then times ``late``, ``lost`` and the recovery, and the run's
journal and resources before and after say whether only the in-flight step re-ran and every
resource is held again. The work each preemption puts at risk (console/work_at_risk.py, at
the gateway's prices) is shown before the confirmation and reported per run, and so is the
restore of resources declared ``on_pause = "snapshot"``. The evaluation is
:mod:`console.drill_report`.
"""

from __future__ import annotations

import time
from collections import defaultdict
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from console.cli.confirm import ask_or_stop, interactive, refuse_unconfirmable
from console.cli.exits import ExitCode, fail, fail_from_error
from console.cli.options import ContextOption, OutputOption, TokenOption, UrlOption, YesOption
from console.cli.output import (
    OutputFormat,
    emit,
    esc,
    hint,
    make_table,
    print_table,
    stderr_console,
)
from console.cli.session import connection_of, run_async, with_gateway

if TYPE_CHECKING:
    from console.client import FleetView, GatewayClient
    from console.config import Connection
    from console.drill_report import DrillResult, Observation
    from console.model import JournalStep, Resource, Run
    from console.prices import PriceTable

ACTIVE = ("running", "waiting")
SETTLE_S = 1.5  # after recovery: let the re-run step finish and the journal catch up


def drill_command(
    ctx: typer.Context,
    filter_: Annotated[
        str | None,
        typer.Option("--filter", help="Only runs matching this filter (as in the TUI's /).",
                     show_default=False),
    ] = None,
    count: Annotated[
        int, typer.Option("--count", min=1, help="Runs to preempt per backend.")
    ] = 1,
    yes: YesOption = False,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1.0, help="Seconds to wait for each recovery.")
    ] = 120.0,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """Preempt runs on purpose (the context's preempt_command) and report their recovery."""
    conn = connection_of(ctx, url, token, context)
    refuse_unconfirmable(conn, "preempt runs", yes=yes, dry_run=False)
    template = _preempt_template(conn)

    async def select(client: GatewayClient) -> tuple[list[Run], PriceTable]:
        return select_runs(client.view, filter_, count), client.view.prices

    targets, prices = with_gateway(conn, select)
    if not targets:
        fail(ExitCode.NOT_FOUND, "no active run with heartbeats matches: nothing to preempt")
    if output is OutputFormat.TEXT or interactive():
        table = make_table("RUN", "BACKEND", "STATE", "WORK AT RISK", "COMMAND")
        from console.model import utcnow
        from console.preempt_template import preempt_argv
        from console.work_at_risk import describe, work_at_risk

        for run in targets:
            argv = preempt_argv(template, run_id=run.id, native_id=run.native_id,
                                backend=run.backend, context=run.context)
            risk = describe(work_at_risk(run, utcnow(), prices))
            table.add_row(esc(run.id), esc(run.backend), esc(run.state.value), esc(risk),
                          esc(" ".join(argv)))
        if output is OutputFormat.TEXT:
            print_table(table)
        else:  # stdout carries the JSON document only
            stderr_console().print(table)
    if not yes:
        ask_or_stop(f"Preempt {len(targets)} run(s)?")
    from console.client import GatewayError

    try:
        results = run_async(run_drill(conn, template, targets, timeout))
    except GatewayError as exc:
        fail_from_error(exc)
    emit(output, {"results": [r.as_json() for r in results]}, lambda: _render(results))
    if not all(r.clean for r in results):
        raise typer.Exit(int(ExitCode.FAILED))


def _preempt_template(conn: Connection) -> str:
    from console.config import ConfigError, load_config

    try:
        config = load_config()
    except ConfigError as exc:
        fail(ExitCode.USAGE, str(exc))
    chosen = config.contexts.get(conn.context)
    if chosen is None or not chosen.preempt_command:
        fail(
            ExitCode.USAGE,
            f"context {conn.context!r} has no preempt_command: irq never kills processes "
            "it did not start",
            hint=f"set preempt_command under [contexts.{conn.context}] in "
            f"{config.path} (e.g. \"kubectl delete pod -l run={{native_id}}\")",
        )
    return chosen.preempt_command


def select_runs(view: FleetView, filter_: str | None, count: int) -> list[Run]:
    """Active runs with heartbeats (matching the filter), ``count`` per backend, by id."""
    from console.model import utcnow
    from console.run_filter import FilterQuery
    from console.semantics import unified_state

    query = FilterQuery.parse(filter_ or "")
    now = utcnow()
    per_backend: dict[str, list[Run]] = defaultdict(list)
    for run in sorted(view.runs.values(), key=lambda r: r.id):
        state = unified_state(run, now)
        if state.value not in ACTIVE or run.heartbeat_at is None:
            continue
        if not query.matches(run, state, now=now):
            continue
        if len(per_backend[run.backend]) < count:
            per_backend[run.backend].append(run)
    return [run for runs in per_backend.values() for run in runs]


async def run_drill(
    conn: Connection, template: str, targets: list[Run], timeout: float
) -> list[DrillResult]:
    import asyncio

    from console.client import GatewayClient
    from console.drill_report import evaluate

    async with GatewayClient(conn.url, conn.token, client="irq-drill") as client:
        pump = asyncio.create_task(_pump(client))
        try:
            observations = await asyncio.gather(
                *(_drill_one(client, template, run, timeout) for run in targets)
            )
        finally:
            pump.cancel()
    return [evaluate(obs) for obs in observations]


async def _pump(client: GatewayClient) -> None:
    """Keep consuming the subscription (the view applies the events as they come)."""
    while await client.updates() is not None:
        pass


async def _journal(client: GatewayClient, run_id: str) -> list[JournalStep]:
    from console.model import JournalStep

    data = await client.query("run", run_id=run_id)
    steps = data.get("journal") if isinstance(data, dict) else None
    return [JournalStep.model_validate(s) for s in steps or []]


async def _preempt(argv: list[str]) -> str | None:
    """Run the preempt command (no shell); None when it succeeded, else why not."""
    import asyncio

    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
    except OSError as exc:
        return f"{argv[0]}: {exc.strerror or exc}"
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return f"{argv[0]} did not finish in 60s"
    if proc.returncode != 0:
        text = out.decode(errors="replace").strip().splitlines()
        return f"{argv[0]} exited {proc.returncode}" + (f": {text[-1]}" if text else "")
    return None


async def _drill_one(
    client: GatewayClient, template: str, run: Run, timeout: float
) -> Observation:
    import asyncio

    from console.drill_report import Observation
    from console.model import RunState, utcnow
    from console.preempt_template import preempt_argv
    from console.semantics import unified_state
    from console.work_at_risk import work_at_risk

    current = client.view.runs.get(run.id, run)
    resources_before = list(current.resources)
    risk = work_at_risk(current, utcnow(), client.view.prices)
    argv = preempt_argv(template, run_id=run.id, native_id=run.native_id,
                        backend=run.backend, context=run.context)
    error = await _preempt(argv)
    preempted_at = utcnow()
    # the journal as the preemption left it: the step in flight then is the one that may re-run
    before = await _journal(client, run.id)
    common: dict[str, Any] = {
        "run_id": run.id, "backend": run.backend, "preempted_at": preempted_at,
        "journal_before": before, "resources_before": resources_before,
        "work_at_risk": risk,
    }
    if error is not None:
        return Observation(**common, preempt_error=error)
    late_at: datetime | None = None
    lost_at: datetime | None = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = utcnow()
        seen = client.view.runs.get(run.id)
        if seen is not None:
            state = unified_state(seen, now)
            if state is RunState.LATE and late_at is None:
                late_at = now
            if (state is RunState.LOST or seen.preempted) and lost_at is None:
                lost_at = now
                late_at = late_at or now
            fresh = seen.heartbeat_at is not None and seen.heartbeat_at > preempted_at
            if state is RunState.COMPLETED or (state.value in ACTIVE and fresh):
                recovered = "completed" if state is RunState.COMPLETED else "running"
                restored_at = (await _restored(client, run.id, resources_before, deadline)
                               if recovered == "running" else None)
                seen = client.view.runs.get(run.id, seen)
                # resources as the recovered agent reports them now: once the re-run step
                # finishes, a step-scoped resource is released again, as it should be
                held = list(seen.resources)
                after, final = await _settled(client, run.id, before, deadline)
                return Observation(
                    **common, late_at=late_at, lost_at=lost_at, recovered_at=now,
                    recovered_state=recovered, journal_after=after, restored_at=restored_at,
                    resources_after=list(final.resources) if final and recovered ==
                    "completed" else held,
                )
            if state.terminal:
                break
        await asyncio.sleep(0.1)
    return Observation(**common, late_at=late_at, lost_at=lost_at,
                       timed_out=time.monotonic() >= deadline)


async def _restored(client: GatewayClient, run_id: str, before: list[Resource],
                    deadline: float) -> datetime | None:
    """When the recovered agent reports every ``on_pause = "snapshot"`` resource it held
    before held again (its state restored); None when it has none or not by the deadline."""
    import asyncio

    from console.model import utcnow

    wanted = {r.id for r in before if r.on_pause == "snapshot" and r.state == "held"}
    while wanted and time.monotonic() < deadline:
        seen = client.view.runs.get(run_id)
        held = {r.id for r in seen.resources if r.state == "held"} if seen else set()
        if wanted <= held:
            return utcnow()
        await asyncio.sleep(0.05)
    return None


async def _settled(
    client: GatewayClient, run_id: str, before: list[JournalStep], deadline: float
) -> tuple[list[JournalStep], Run | None]:
    """The journal once the step that was in flight has completed again (or the deadline),
    read again after a short settle so a step re-run right after it is seen too."""
    import asyncio

    in_flight = {s.name for s in before if s.status == "in_flight"}
    limit = min(deadline, time.monotonic() + 30)
    while time.monotonic() < limit:
        steps = await _journal(client, run_id)
        if not in_flight or any(s.name in in_flight and s.status == "completed" for s in steps):
            break
        await asyncio.sleep(0.3)
    await asyncio.sleep(SETTLE_S)
    return await _journal(client, run_id), client.view.runs.get(run_id)


def _render(results: list[DrillResult]) -> None:
    table = make_table("RUN", "BACKEND", "LATE", "LOST", "RECOVERED", "RE-RAN", "RESOURCES",
                       "CLEAN", "DETAIL")

    def secs(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}s"

    for r in results:
        table.add_row(
            esc(r.run_id), esc(r.backend), secs(r.late_after_s), secs(r.lost_after_s),
            secs(r.recovered_after_s), esc(", ".join(r.rerun_steps) or "-"),
            "ok" if r.resources_ok else "NOT OK", "yes" if r.clean else "NO", esc(r.detail),
        )
    print_table(table)
    clean = sum(r.clean for r in results)
    hint(f"{clean} of {len(results)} run(s) recovered cleanly")


