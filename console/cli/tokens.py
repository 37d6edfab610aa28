"""Bearer tokens of the local gateway: ``irq token create|list|revoke``.

They work on the token store under IRQ_HOME (console/gateway/auth.py), not over the wire:
whoever may write that directory administers the gateway. A running gateway rereads the
store at each handshake, so a new token works and a revoked one is refused at once (and its
open connections are closed within a second).

With the gateways' shared PostgreSQL journal (``--journal`` or ``IRQ_JOURNAL``, as ``irq serve``
takes it), ``list`` and ``revoke`` also see the tokens the other gateways share (the
``irq_tokens`` table, console/gateway/shared_tokens.py: hashes, never a token), marked with the
gateway they came from; ``revoke`` writes the revocation there, so every gateway refuses the
token within about two seconds, whichever host's file it came from.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from console.cli.exits import ExitCode, diagnose, fail
from console.cli.help_layout import IrqCommand, IrqGroup
from console.cli.options import OutputOption, YesOption
from console.cli.output import OutputFormat, emit, esc, fmt_time, hint, make_table, print_table

if TYPE_CHECKING:
    from console.gateway.shared_tokens import SharedTokens

token_app = typer.Typer(
    cls=IrqGroup,
    help="Bearer tokens (stored hashed under IRQ_HOME; a running gateway accepts new ones "
    "and refuses revoked or expired ones at once).",
    no_args_is_help=True,
)


class TokenRole(StrEnum):
    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"
    AGENT = "agent"


JournalOption = Annotated[
    str | None,
    typer.Option(
        "--journal",
        envvar="IRQ_JOURNAL",
        show_default=False,
        help="The gateways' shared journal, postgresql://USER@HOST:PORT/DB (as `irq serve "
        "--journal`): the tokens every gateway on it shares count too. Default: this host's "
        "tokens.json only.",
    ),
]


@contextlib.contextmanager
def _shared_tokens(journal: str) -> Iterator[SharedTokens]:
    """The shared token table of ``journal`` (JournalUnavailable when it cannot be opened)."""
    from console.gateway.journal_engines import open_journal
    from console.gateway.shared_tokens import SharedTokens

    store = open_journal(journal)
    try:
        yield SharedTokens(store, origin="")
    finally:
        store.close()


def _known_tokens(path: Path, shared: SharedTokens | None
                  ) -> tuple[list[dict[str, Any]], set[str]]:
    """This host's tokens and, with the shared journal, every gateway's (auth.merged_tokens);
    and the hashes of the journal's rows not revoked there (the gateways still accept those,
    whatever this host's file says)."""
    from console.gateway.auth import merged_tokens

    rows = shared.entries() if shared is not None else []
    return (merged_tokens(_token_entries(path), rows),
            {e["sha256"] for e in rows if not e.get("revoked_at")})


def _check_journal(journal: str) -> None:
    from console.gateway.journal_store import is_postgres_url, redacted

    if not is_postgres_url(journal):
        fail(ExitCode.USAGE, f"--journal takes the gateways' postgresql:// URL, not "
             f"{redacted(journal)!r} (a SQLite journal shares no tokens)")


def _unreachable(journal: str, exc: Exception) -> str:
    """What went wrong with the journal, without its password (JournalUnavailable's text
    names the journal already; a statement's error is named by its type)."""
    from console.gateway.journal_store import JournalUnavailable, redacted

    if isinstance(exc, JournalUnavailable):
        return str(exc)
    return f"the journal at {redacted(journal)} failed: {type(exc).__name__}: {exc}"


def _token_entries(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, json.JSONDecodeError) as exc:
        fail(ExitCode.FAILED, f"cannot read the token store {path}: {exc}")
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


@token_app.command("create", cls=IrqCommand)
def token_create_command(
    role: Annotated[
        TokenRole,
        typer.Option(
            "--role",
            help="viewer (read only) < operator (act and decide) < admin; agent: heartbeats "
            "on the agent channel only.",
            case_sensitive=False,
            show_default=False,
        ),
    ],
    name: Annotated[
        str | None,
        typer.Option("--name", help="Name of the token: the identity in the audit trail."),
    ] = None,
    scope: Annotated[
        list[str] | None,
        typer.Option(
            "--scope",
            help="Agent tokens only, required, repeatable: the runs the agent may report for, "
            "BACKEND:CONTEXT\\[/RUN_ID_PREFIX] (e.g. dbos:local, dbos:prod/nightly-; CONTEXT * "
            "for every context of the backend).",
            show_default=False,
        ),
    ] = None,
    ttl: Annotated[
        str | None,
        typer.Option(
            "--ttl",
            help="Expire the token after this long (30m, 8h, 7d); the gateway then refuses "
            "it with 401 'expired'. Default: no expiry.",
            show_default=False,
        ),
    ] = None,
    output: OutputOption = OutputFormat.TEXT,
) -> None:
    """Create a token and print it (only its hash is stored)."""
    from console.durations import parse_duration
    from console.gateway.auth import AgentScope, create_token, tokens_path
    from console.model import Role

    ttl_s: float | None = None
    if ttl is not None:
        try:
            ttl_s = parse_duration(ttl).total_seconds()
        except ValueError as exc:
            fail(ExitCode.USAGE, f"--ttl: {exc}")
    scopes: list[AgentScope] | None = None
    if role is TokenRole.AGENT:
        if not scope:
            fail(
                ExitCode.USAGE,
                "an agent token needs --scope BACKEND:CONTEXT[/RUN_ID_PREFIX] (the runs it "
                "may report for), e.g. --scope dbos:local",
            )
        try:
            scopes = [AgentScope.parse(s) for s in scope]
        except ValueError as exc:
            fail(ExitCode.USAGE, str(exc))
    elif scope:
        fail(ExitCode.USAGE, f"--scope is for agent tokens; a {role.value} token has no scope")
    path = tokens_path()
    try:
        token = create_token(Role(role.value), name, scopes=scopes, ttl_s=ttl_s)
    except (OSError, ValueError) as exc:
        fail(ExitCode.FAILED, f"cannot create a token in {path}: {exc}")
    import hashlib  # OpenSSL's: not loaded for --help

    digest = hashlib.sha256(token.encode("utf-8")).hexdigest()
    stored = next((e for e in _token_entries(path) if e.get("sha256") == digest), {})
    identity = stored.get("identity", name)
    record: dict[str, Any] = {"token": token, "role": role.value, "identity": identity,
                              "store": str(path), "expires_at": stored.get("expires_at")}
    if scopes is not None:
        record["scopes"] = [str(s) for s in scopes]

    def text() -> None:
        sys.stdout.write(token + "\n")
        sys.stdout.flush()
        scoped = f" for {', '.join(record['scopes'])}" if scopes is not None else ""
        expiry = f", expires {fmt_time(record['expires_at'])}" if record["expires_at"] else ""
        diagnose(f"created {role.value} token {identity!r}{scoped}{expiry}; its hash is stored "
                 f"in {path}")
        hint("use it with: export IRQ_TOKEN=<token>  (or --token, or the config file)")

    emit(output, record, text)


def _listing(entry: dict[str, Any], used: dict[str, str]) -> dict[str, Any]:
    from console.gateway.auth import token_id, token_state

    return {
        "id": token_id(entry),
        "identity": entry.get("identity"),
        "prefix": entry.get("prefix"),
        "role": entry.get("role"),
        "scopes": entry.get("scopes") if entry.get("role") == "agent" else None,
        "created_at": entry.get("created_at"),
        "expires_at": entry.get("expires_at"),
        "revoked_at": entry.get("revoked_at"),
        "last_used_at": used.get(token_id(entry)),
        "state": token_state(entry),
        "local": bool(entry.get("local", True)),
        "origin": entry.get("origin") or None,
    }


def _where(entry: dict[str, Any]) -> str:
    """Where a listed token comes from, for people."""
    return "this host" if entry["local"] else f"{entry['origin'] or '?'} (shared)"


def _scope_text(entry: dict[str, Any]) -> str:
    if entry["role"] != "agent":
        return "-"
    scopes = entry["scopes"]
    return "unscoped (any run)" if scopes is None else ", ".join(map(str, scopes))


@token_app.command("list", cls=IrqCommand)
def token_list_command(journal: JournalOption = None,
                       output: OutputOption = OutputFormat.TEXT) -> None:
    """List tokens: name, role, scope, created, expires, last use, state (never the tokens;
    the prefix column is the start of each token, enough to name it to `irq token revoke`).
    With --journal, also the tokens the other gateways share, with the gateway each came from
    (origin); a journal that cannot be read: this host's tokens and exit 6."""
    from console.gateway.auth import read_last_use, tokens_path

    path = tokens_path()
    used = read_last_use(path.parent)
    problem = ""
    if journal:
        _check_journal(journal)
        try:
            with _shared_tokens(journal) as shared:
                known, _ = _known_tokens(path, shared)
        except (typer.Exit, typer.Abort):
            raise
        except Exception as exc:  # JournalUnavailable, or an error of the database
            problem = _unreachable(journal, exc)
            known, _ = _known_tokens(path, None)
    else:
        known, _ = _known_tokens(path, None)
    entries = [_listing(e, used) for e in known]

    def text() -> None:
        if not entries:
            hint(f"no tokens in {path}; create one with `irq token create --role operator`")
            return
        columns = ["name", "prefix", "role", "scope", "created", "expires", "last use", "state"]
        table = make_table(*columns, *(["origin"] if journal else []))
        for e in entries:
            state = e["state"]
            shown_state = {"revoked": "[red]revoked[/]", "expired": "[yellow]expired[/]"}.get(
                state, "active")
            table.add_row(esc(e["identity"]), esc(e["prefix"] or e["id"]), esc(e["role"]),
                          esc(_scope_text(e)), fmt_time(e["created_at"]),
                          fmt_time(e["expires_at"]) if e["expires_at"] else "never",
                          fmt_time(e["last_used_at"]) if e["last_used_at"] else "never",
                          shown_state, *([esc(_where(e))] if journal else []))
        print_table(table)

    emit(output, entries, text)
    if problem:
        fail(ExitCode.UNREACHABLE, f"only this host's tokens are listed: {problem}")


def _complete_names(incomplete: str) -> list[str]:
    """Names of the tokens not yet revoked (shell completion reads the local store only)."""
    from console.gateway.auth import tokens_path

    try:
        data = json.loads(tokens_path().read_text())
    except (OSError, ValueError):
        return []
    names = {str(e.get("identity")) for e in data if isinstance(e, dict)
             and e.get("identity") and not e.get("revoked_at")} if isinstance(data, list) else set()
    return sorted(n for n in names if n.startswith(incomplete))


@token_app.command("revoke", cls=IrqCommand)
def token_revoke_command(
    selector: Annotated[
        str,
        typer.Argument(
            help="The token's name (every token with that name), the prefix `irq token "
            "list` shows (irq_…), its id (6+ characters), or the token itself.",
            metavar="NAME|PREFIX",
            show_default=False,
            autocompletion=_complete_names,
        ),
    ],
    yes: YesOption = False,
    journal: JournalOption = None,
    output: OutputOption = OutputFormat.TEXT,
) -> None:
    """Revoke tokens: a running gateway refuses them at the next handshake (401 'revoked')
    and closes their open connections within a second. With --journal, any token a gateway
    on it shares, revoked for every gateway (within about two seconds). Asks first (default
    No)."""
    if journal:
        _check_journal(journal)
        try:
            with _shared_tokens(journal) as shared:
                _revoke(selector, shared, yes=yes, output=output)
        except (typer.Exit, typer.Abort):  # exits and a refused confirmation (RuntimeErrors)
            raise
        except Exception as exc:  # JournalUnavailable, or an error of the database
            fail(ExitCode.UNREACHABLE, f"nothing revoked: {_unreachable(journal, exc)}",
                 hint="without --journal (and IRQ_JOURNAL) only this host's tokens.json is "
                 "used; its gateway shares the revocation when it next reaches the journal")
    else:
        _revoke(selector, None, yes=yes, output=output)


def _revoke(selector: str, shared: SharedTokens | None, *, yes: bool,
            output: OutputFormat) -> None:
    from console.cli.confirm import ask_or_stop, interactive
    from console.gateway.auth import (
        matching_tokens,
        read_last_use,
        revoke_tokens,
        token_id,
        tokens_path,
    )
    from console.model import utcnow

    path = tokens_path()
    entries, accepted = _known_tokens(path, shared)
    # revoked here but not in the journal (this host's gateway has not copied it there yet):
    # the other gateways still accept it, so it is revoked there too
    found = [e for e in matching_tokens(entries, selector)
             if not e.get("revoked_at") or e["sha256"] in accepted]
    if not found:
        already = matching_tokens(entries, selector)
        if already:
            fail(ExitCode.CONFLICT, f"{selector!r} names only revoked tokens; nothing to do")
        listing = "irq token list --journal URL" if shared is not None else "irq token list"
        fail(ExitCode.NOT_FOUND, f"no token matches {selector!r}",
             hint=f"list them with `{listing}`")
    is_name = any(e.get("identity") == selector for e in found)
    if len(found) > 1 and not is_name:
        fail(ExitCode.USAGE, f"{selector!r} matches {len(found)} tokens; give more of the "
             "prefix, or the name to revoke every token with that name")
    used = read_last_use(path.parent)
    listed = [_listing(e, used) for e in found]
    if not yes:
        if not interactive():
            fail(ExitCode.USAGE, "refusing to revoke without confirmation: stdin is not a "
                 "terminal", hint="pass --yes to confirm")
        for e in listed:
            hint(f"  {e['identity']} ({e['role']}, {e['prefix'] or e['id']}, {_where(e)}, last "
                 f"use {fmt_time(e['last_used_at']) if e['last_used_at'] else 'never'})")
        count = f"{len(listed)} tokens" if len(listed) > 1 else "this token"
        everywhere = " on every gateway of the journal" if shared is not None else ""
        ask_or_stop(f"revoke {count}{everywhere}? clients using it are disconnected")
    now = utcnow().isoformat()
    # the shared rows first: if the journal fails here, nothing was revoked anywhere
    in_journal = (set(shared.revoke([e["sha256"] for e in found], now)) if shared is not None
                  else set())
    try:
        in_file = {token_id(e): e for e in revoke_tokens(
            [token_id(e) for e in found if e.get("local")])}
    except (OSError, ValueError) as exc:
        fail(ExitCode.FAILED, f"cannot revoke in {path}: {exc}"
             + (" (revoked in the shared journal)" if in_journal else ""))
    result = []
    for e in found:
        done = in_file.get(token_id(e), {})
        shown = _listing({**e, "revoked_at": done.get("revoked_at") or e.get("revoked_at")
                          or now}, used)
        shown["everywhere"] = e["sha256"] in in_journal
        result.append(shown)

    def text() -> None:
        for e in result:
            where = ("on every gateway of the journal" if e["everywhere"]
                     else "in this host's tokens.json")
            diagnose(f"revoked {e['role']} token {e['identity']!r} ({e['prefix'] or e['id']}) "
                     f"{where}")

    emit(output, result, text)
