"""Bearer tokens of the local gateway: ``irq token create|list|revoke``.

They work on the token store under IRQ_HOME (console/gateway/auth.py), not over the wire:
whoever may write that directory administers the gateway. A running gateway rereads the
store at each handshake, so a new token works and a revoked one is refused at once (and its
open connections are closed within a second).
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from console.cli.exits import ExitCode, diagnose, fail
from console.cli.output import (
    OutputFormat,
    OutputOption,
    emit,
    esc,
    fmt_time,
    hint,
    make_table,
    print_table,
)

token_app = typer.Typer(
    help="Bearer tokens (stored hashed under IRQ_HOME; a running gateway accepts new ones "
    "and refuses revoked or expired ones at once).",
    no_args_is_help=True,
)


class TokenRole(StrEnum):
    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"
    AGENT = "agent"


def _token_entries(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, json.JSONDecodeError) as exc:
        fail(ExitCode.FAILED, f"cannot read the token store {path}: {exc}")
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


@token_app.command("create")
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
    }


def _scope_text(entry: dict[str, Any]) -> str:
    if entry["role"] != "agent":
        return "-"
    scopes = entry["scopes"]
    return "unscoped (any run)" if scopes is None else ", ".join(map(str, scopes))


@token_app.command("list")
def token_list_command(output: OutputOption = OutputFormat.TEXT) -> None:
    """List tokens: name, role, scope, created, expires, last use, state (never the tokens;
    the prefix column is the start of each token, enough to name it to `irq token revoke`)."""
    from console.gateway.auth import read_last_use, tokens_path

    path = tokens_path()
    used = read_last_use(path.parent)
    entries = [_listing(e, used) for e in _token_entries(path)]

    def text() -> None:
        if not entries:
            hint(f"no tokens in {path}; create one with `irq token create --role operator`")
            return
        table = make_table("name", "prefix", "role", "scope", "created", "expires", "last use",
                           "state")
        for e in entries:
            state = e["state"]
            shown_state = {"revoked": "[red]revoked[/]", "expired": "[yellow]expired[/]"}.get(
                state, "active")
            table.add_row(esc(e["identity"]), esc(e["prefix"] or e["id"]), esc(e["role"]),
                          esc(_scope_text(e)), fmt_time(e["created_at"]),
                          fmt_time(e["expires_at"]) if e["expires_at"] else "never",
                          fmt_time(e["last_used_at"]) if e["last_used_at"] else "never",
                          shown_state)
        print_table(table)

    emit(output, entries, text)


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


@token_app.command("revoke")
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
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    output: OutputOption = OutputFormat.TEXT,
) -> None:
    """Revoke tokens: a running gateway refuses them at the next handshake (401 'revoked')
    and closes their open connections within a second. Asks first (default No)."""
    from console.cli.confirm import ask_or_stop, interactive
    from console.gateway.auth import matching_tokens, read_last_use, revoke_tokens, tokens_path

    path = tokens_path()
    entries = _token_entries(path)
    found = [e for e in matching_tokens(entries, selector) if not e.get("revoked_at")]
    if not found:
        already = matching_tokens(entries, selector)
        if already:
            fail(ExitCode.CONFLICT, f"{selector!r} names only revoked tokens; nothing to do")
        fail(ExitCode.NOT_FOUND, f"no token matches {selector!r}",
             hint="list them with `irq token list`")
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
            hint(f"  {e['identity']} ({e['role']}, {e['prefix'] or e['id']}, last use "
                 f"{fmt_time(e['last_used_at']) if e['last_used_at'] else 'never'})")
        count = f"{len(listed)} tokens" if len(listed) > 1 else "this token"
        ask_or_stop(f"revoke {count}? clients using it are disconnected")
    try:
        done = revoke_tokens([e["id"] for e in listed])
    except (OSError, ValueError) as exc:
        fail(ExitCode.FAILED, f"cannot revoke in {path}: {exc}")
    result = [_listing(e, used) for e in done]

    def text() -> None:
        for e in result:
            diagnose(f"revoked {e['role']} token {e['identity']!r} ({e['prefix'] or e['id']})")

    emit(output, result, text)
