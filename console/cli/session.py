"""Talking to the gateway from a command: resolving the connection, one-shot clients,
gateway errors as exit codes, and expanding short run / interrupt ids from the snapshot.
"""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from console.cli.answers import answer_dict
from console.cli.exits import ExitCode, fail, fail_from_error

if TYPE_CHECKING:
    from console.client import FleetView, GatewayClient
    from console.config import Connection
    from console.ids import Candidate

T = TypeVar("T")


@dataclass
class GlobalOptions:
    """The options given before the subcommand (``irq --url … runs``)."""

    url: str | None = None
    token: str | None = None
    context: str | None = None

    def connection(self) -> Connection:
        from console.config import ConfigError, resolve_connection

        try:
            return resolve_connection(url=self.url, token=self.token, context=self.context)
        except ConfigError as exc:
            fail(ExitCode.USAGE, str(exc))


def global_options(ctx: typer.Context) -> GlobalOptions:
    root = ctx.find_root()
    obj = root.obj if isinstance(root.obj, GlobalOptions) else None
    return obj or GlobalOptions()


def connection_of(
    ctx: typer.Context,
    url: str | None = None,
    token: str | None = None,
    context: str | None = None,
) -> Connection:
    """flag after the subcommand > flag before it > env > config file > default."""
    root = global_options(ctx)
    return GlobalOptions(
        url=url or root.url, token=token or root.token, context=context or root.context
    ).connection()


def run_async(main: Awaitable[T]) -> T:
    """``asyncio.run(main)``, but the value comes back outside the task asyncio runs.

    On Python 3.11, ``asyncio.run`` ends with ``signal.getsignal(SIGINT)``, which formats
    ``repr()`` of its SIGINT handler -- a partial holding the main task, whose repr holds the
    task's result. A command's result is a whole fleet (``FleetView``: 10,000 pydantic runs),
    so that repr, thrown away unread, cost ~0.4 s of ``irq runs -o json``. The task here
    returns None; the value travels in a list.
    """
    import asyncio

    box: list[T] = []

    async def hold() -> None:
        box.append(await main)

    asyncio.run(hold())
    return box[0]


def with_gateway(
    conn: Connection,
    work: Callable[[GatewayClient], Awaitable[T]],
    *,
    snapshot: bool = True,
    subscribe: bool = False,
) -> T:
    """Connect, run ``work`` on the client, close: the one way a command talks to the gateway.

    By default one-shot: a snapshot, no event stream. ``subscribe=True``: the view follows
    the gateway's events after the snapshot (``--wait`` watches for an effect on the same
    connection that sent the command). ``snapshot=False`` (one-shot only): no snapshot at
    all (``client.view`` stays empty), for work that asks the gateway a query.

    Gateway errors become clear messages and exit codes; never a traceback.
    """
    from console.client import GatewayClient, GatewayError

    async def session() -> T:
        client = GatewayClient(conn.url, conn.token, client="irq-cli", subscribe=subscribe,
                               snapshot=snapshot)
        await client.connect()
        try:
            return await work(client)
        finally:
            await client.close()

    try:
        return run_async(session())
    except GatewayError as exc:
        fail_from_error(exc)


@contextmanager
def bulk_json() -> Iterator[None]:
    """Around a one-shot command's decoding, reshaping and printing of a large JSON answer
    (``irq runs -o json`` at 10,000 runs: ~100,000 dicts and lists). Such values hold no
    reference cycles, yet every few hundred new containers the cyclic collector ran, and
    its older generations rescanned the growing listing: ~30 ms of that command's ~0.4 s
    (benchmarks/cli_startup.py). Collection is paused meanwhile; it was already off when
    the caller turned it off."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def read_only_guard(conn: Connection, what: str) -> None:
    """Refuse mutations from a context marked ``read_only`` in the config file."""
    if conn.read_only:
        fail(
            ExitCode.UNAUTHORIZED,
            f"context {conn.context!r} is read-only: refusing to {what}",
            hint="use another context (--context) or set read_only = false in the config file",
        )


# ------------------------------------------------------------------------- id expansion


def _run_id_like(value: str) -> bool:
    from console.model import split_run_id

    try:
        split_run_id(value)
    except ValueError:
        return False
    return True


def _interrupt_id_like(value: str) -> bool:
    run_id, sep, native = value.partition("#")
    return bool(sep and native) and _run_id_like(run_id)


def expand_id(
    query: str,
    candidates: Iterable[Candidate],
    *,
    noun: str,
    looks_complete: Callable[[str], bool],
    list_command: str,
) -> str:
    """The one id ``query`` names under ``console.ids``' strict rule (exact id, exact
    native id, unique prefix -- never a suffix). Every mutation resolves ids here.
    Ambiguity exits 2 listing the candidates; no match exits 3, unless ``query`` is a
    complete id (the gateway may know runs its snapshot does not list)."""
    from console.ids import match_id

    found = match_id(query, candidates)
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        shown = "\n".join(f"    {f}" for f in found[:10])
        more = f"\n    … and {len(found) - 10} more" if len(found) > 10 else ""
        fail(
            ExitCode.USAGE,
            f"{query!r} matches {len(found)} {noun}s; give more of the id:\n{shown}{more}",
        )
    if looks_complete(query):
        return query
    fail(
        ExitCode.NOT_FOUND, f"no {noun} matches {query!r}", hint=f"list them with `{list_command}`"
    )


def expand_run_id(view: FleetView, query: str) -> str:
    from console.ids import run_candidates

    return expand_id(
        query,
        run_candidates(view.runs.values()),
        noun="run",
        looks_complete=_run_id_like,
        list_command="irq runs",
    )


def expand_interrupt_id(view: FleetView, query: str) -> str:
    from console.ids import interrupt_candidates

    return expand_id(
        query,
        interrupt_candidates(view.interrupts.values()),
        noun="interrupt",
        looks_complete=_interrupt_id_like,
        list_command="irq inbox",
    )


def expand_run_ids(view: FleetView, queries: Iterable[str]) -> list[str]:
    """Expand every query (in order, without duplicates)."""
    out: list[str] = []
    for query in queries:
        run_id = expand_run_id(view, query)
        if run_id not in out:
            out.append(run_id)
    return out


async def plan_one_run(client: GatewayClient, query: str, action: str, **extra: Any
                       ) -> tuple[str, dict[str, Any], dict[str, dict[str, Any]]]:
    """The gateway's plan of ``action`` on the one run ``query`` names (``irq retry``,
    ``irq release``): the run id, the plan, and the run's contract for the plan's rendering.
    ``extra``: the action's own query fields (``from_step``, ``resource``)."""
    target = expand_run_id(client.view, query)
    plan = answer_dict(await client.query("plan", action=action, targets=[target], **extra),
                       f"to a {action} plan query")
    run = client.view.runs.get(target)
    return target, plan, ({target: run.contract()} if run is not None else {})
