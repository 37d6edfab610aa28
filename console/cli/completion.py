"""Shell completion of run and interrupt ids from the current context's gateway.

Completion runs on every TAB, so it must be fast and must never print: one connection with
a short connect timeout (``CONNECT_TIMEOUT_S``) and a hard cap on the whole lookup, the
answer cached for ``CACHE_TTL_S`` seconds in the user's cache directory (a gateway that is
down is cached too: it costs one timeout per TTL, not one per keypress), and any failure --
no config, a bad token, an unreachable gateway -- completes nothing and writes nothing to
stderr.

Offered words prefer a short id that resolves exactly and has no ``:`` (bash splits words
at ``:``): the native id when it is unique, then ``RUN_NATIVE#INTERRUPT_NATIVE`` for
interrupts, else the full id. Every offered word resolves with ``expand_id``'s strict rule.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from console.terminal_text import terminal_safe

if TYPE_CHECKING:
    from console.client import GatewayClient
    from console.config import Connection

CONNECT_TIMEOUT_S = 0.5
LOOKUP_CAP_S = 1.5
CACHE_TTL_S = 5.0


@dataclass
class IdChoice:
    """One id and its shorter exact aliases, most preferred first."""

    id: str
    aliases: list[str] = field(default_factory=list)


@dataclass
class KnownIds:
    runs: list[IdChoice] = field(default_factory=list)
    pending_interrupts: list[IdChoice] = field(default_factory=list)
    open_obligations: list[IdChoice] = field(default_factory=list)  # open or overdue

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": [[c.id, c.aliases] for c in self.runs],
            "pending_interrupts": [[c.id, c.aliases] for c in self.pending_interrupts],
            "open_obligations": [[c.id, c.aliases] for c in self.open_obligations],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KnownIds:
        def choices(key: str) -> list[IdChoice]:
            return [IdChoice(str(item[0]), [str(a) for a in item[1]]) for item in data.get(key, [])]

        return cls(choices("runs"), choices("pending_interrupts"), choices("open_obligations"))


def offer(choices: list[IdChoice], incomplete: str) -> list[str]:
    """The words to offer for ``incomplete``. Without a ``:`` typed, short ids first: per
    id its first unique alias that starts with ``incomplete`` (the full id when its aliases
    match but are not unique). Once a ``:`` is typed, or when no alias matches: full ids."""
    counts = Counter(a for c in choices for a in c.aliases)
    words: list[str] = []
    if ":" not in incomplete:
        for choice in choices:
            matching = [a for a in choice.aliases if a.startswith(incomplete)]
            unique = [a for a in matching if counts[a] == 1]
            if unique:
                words.append(unique[0])
            elif matching:
                words.append(choice.id)
    if not words:
        words = [c.id for c in choices if c.id.startswith(incomplete)]
    # the shell prints candidates raw: an id with control characters (agent-chosen, and
    # impossible to type anyway) is never offered (console/terminal_text.py)
    return sorted(w for w in set(words) if terminal_safe(w) == w)


def _connection(ctx: typer.Context) -> Connection | None:
    """The connection the command line typed so far would use (flags given before or after
    the subcommand, then env, then the config file)."""
    from console.config import resolve_connection

    given: dict[str, str] = {}
    node: Any = ctx
    while node is not None:
        for key in ("url", "token", "context"):
            value = node.params.get(key)
            if isinstance(value, str) and value and key not in given:
                given[key] = value
        node = node.parent
    try:
        return resolve_connection(
            url=given.get("url"), token=given.get("token"), context=given.get("context")
        )
    except Exception:  # noqa: BLE001 - a broken config completes nothing
        return None


def _cache_file(conn: Connection) -> Path:
    import hashlib  # OpenSSL's: not loaded for --help

    from console.config import cache_dir

    key = hashlib.sha256(f"{conn.url}\0{conn.token or ''}".encode()).hexdigest()[:24]
    return cache_dir() / f"completion-ids-{key}.json"


def _read_cache(path: Path, now: float) -> KnownIds | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not (0 <= now - float(data["at"]) < CACHE_TTL_S):
            return None
        return KnownIds.from_json(data["ids"])
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def _fetch(conn: Connection) -> KnownIds:
    """One snapshot from the gateway; an empty answer on any failure."""
    import asyncio

    from console.client import GatewayClient

    async def snapshot() -> KnownIds:
        client = GatewayClient(
            conn.url,
            conn.token,
            client="irq-completion",
            subscribe=False,
            open_timeout=CONNECT_TIMEOUT_S,
            request_timeout=LOOKUP_CAP_S,
        )
        await client.connect()
        try:
            view = client.view

            def short_ids(intr: Any) -> list[str]:
                run_native = intr.run_id.partition("/")[2]
                return [intr.native_id, f"{run_native}#{intr.native_id}"]

            # an alias is offered only when it names one id among all that the resolver
            # sees (decided interrupts included), so it always resolves exactly
            run_aliases = Counter(r.native_id for r in view.runs.values())
            intr_aliases = Counter(a for i in view.interrupts.values() for a in short_ids(i))
            runs = [
                IdChoice(r.id, [r.native_id] if run_aliases[r.native_id] == 1 else [])
                for r in view.runs.values()
            ]
            pending = [
                IdChoice(i.id, [a for a in short_ids(i) if intr_aliases[a] == 1])
                for i in view.pending_interrupts()
            ]
            return KnownIds(runs, pending, await open_obligations(client))
        finally:
            await client.close()

    try:
        from console.cli.session import run_async  # the repr of 10,000 ids costs, see there

        return run_async(asyncio.wait_for(snapshot(), LOOKUP_CAP_S))
    except BaseException:  # noqa: BLE001 - completion never fails loudly (Ctrl-C included)
        return KnownIds()


def known_ids(ctx: typer.Context) -> KnownIds:
    """The ids the gateway of the connection typed so far knows."""
    conn = _connection(ctx)
    return KnownIds() if conn is None else known_ids_of(conn)


def known_ids_of(conn: Connection) -> KnownIds:
    """The ids ``conn``'s gateway knows, from the cache when it is younger than
    ``CACHE_TTL_S`` (written 0600: the file name derives from the token)."""
    from console.config import write_private_file

    path = _cache_file(conn)
    now = time.time()
    cached = _read_cache(path, now)
    if cached is not None:
        return cached
    ids = _fetch(conn)
    with contextlib.suppress(OSError):
        write_private_file(path, json.dumps({"at": now, "ids": ids.to_json()}))
    return ids


def _silently(lookup: Callable[[], list[str]]) -> list[str]:
    """Run ``lookup`` with stderr swallowed (library warnings, asyncio's "never retrieved")."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return lookup()
    except BaseException:  # noqa: BLE001 - a TAB press must never print a traceback
        return []


def complete_run_ids(ctx: typer.Context, incomplete: str) -> list[str]:
    return _silently(lambda: offer(known_ids(ctx).runs, incomplete))


def complete_pending_interrupt_ids(ctx: typer.Context, incomplete: str) -> list[str]:
    return _silently(lambda: offer(known_ids(ctx).pending_interrupts, incomplete))


def complete_open_obligation_ids(ctx: typer.Context, incomplete: str) -> list[str]:
    return _silently(lambda: offer(known_ids(ctx).open_obligations, incomplete))


async def open_obligations(client: GatewayClient) -> list[IdChoice]:
    """Open and overdue obligations by id, with ``RUN_NATIVE#CALL/RULE`` when that is unique
    among all obligations (what ``irq obligation fulfil`` resolves against); none from a
    gateway without the policy layer."""
    from console.client import GatewayError
    from console.ids import obligation_alias as alias

    try:
        data = await client.query("obligations")
    except GatewayError:
        return []
    items = [o for o in data if isinstance(o, dict)] if isinstance(data, list) else []
    ids = [str(o.get("id", "")) for o in items]
    aliases = Counter(alias(i) for i in ids)
    return [
        IdChoice(i, [alias(i)] if alias(i) and aliases[alias(i)] == 1 else [])
        for i, o in zip(ids, items, strict=True)
        if i and o.get("state") in ("open", "overdue")
    ]


#: the environment variable that asks ``irq`` for completions (click's ``_{PROG}_COMPLETE``)
COMPLETE_VAR = "_IRQ_COMPLETE"


def completion_request_problem(environ: Mapping[str, str]) -> str | None:
    """Why a completion request cannot be answered, or None (also when it is none).

    bash's completion function sets ``COMP_WORDS`` and ``COMP_CWORD`` before it runs
    ``_IRQ_COMPLETE=complete_bash irq``; typer reads them unguarded, so the same call
    without them (by hand, from a script) ended in a KeyError. The other shells' requests
    read their variables with defaults and need no check.
    """
    if environ.get(COMPLETE_VAR) != "complete_bash":
        return None
    missing = [name for name in ("COMP_WORDS", "COMP_CWORD") if name not in environ]
    if missing:
        return (
            f"{COMPLETE_VAR}=complete_bash is bash's completion call: "
            f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set"
        )
    if not environ["COMP_CWORD"].strip().isdigit():
        return f"{COMPLETE_VAR}=complete_bash: COMP_CWORD must be a word index, not " + repr(
            terminal_safe(environ["COMP_CWORD"])
        )
    return None
