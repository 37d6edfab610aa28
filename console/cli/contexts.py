"""Contexts of the config file: ``irq ctx list`` and ``irq ctx use NAME``.

``use`` rewrites only the top-level ``current_context`` line of the file (its comments, key
order and any other key stay as they were), atomically and 0600 like every write of the
file; a file that does not parse is refused before anything is written.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any

import typer

from console.cli.exits import ExitCode, diagnose, fail
from console.cli.help_layout import IrqCommand, IrqGroup
from console.cli.options import OutputOption
from console.cli.output import OutputFormat, emit, esc, hint, make_table, print_table

ctx_app = typer.Typer(
    cls=IrqGroup,
    help="Contexts of the config file (gateway URL, token, read-only flag, backends).",
    no_args_is_help=True,
)


def _load() -> Any:
    from console.config import ConfigError, load_config

    try:
        return load_config()
    except ConfigError as exc:
        fail(ExitCode.USAGE, str(exc))


def _listing(config: Any) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "current": name == config.current_context,
            "url": ctx.url,
            "read_only": ctx.read_only,
            "has_token": bool(ctx.token),
            "backends": list(ctx.backends),
        }
        for name, ctx in sorted(config.contexts.items())
    ]


def _complete_contexts(incomplete: str) -> list[str]:
    from console.config import ConfigError, load_config

    try:
        names = load_config().contexts
    except ConfigError:
        return []
    return [n for n in sorted(names) if n.startswith(incomplete)]


@ctx_app.command("list", cls=IrqCommand)
def ctx_list_command(output: OutputOption = OutputFormat.TEXT) -> None:
    """List the contexts; the current one is marked with *. Tokens are never shown."""
    config = _load()
    entries = _listing(config)

    def text() -> None:
        if not entries:
            hint(f"no contexts in {config.path}; add a [contexts.NAME] table with url = ...")
            return
        table = make_table("", "name", "url", "token", "read only", "backends")
        for e in entries:
            table.add_row(
                "*" if e["current"] else "",
                esc(e["name"]),
                esc(e["url"]),
                "yes" if e["has_token"] else "-",
                "yes" if e["read_only"] else "-",
                esc(", ".join(e["backends"]) or "-"),
            )
        print_table(table)
        if config.current_context and config.current_context not in config.contexts:
            hint(f"warning: current_context {config.current_context!r} names no context")
        _env_override()

    emit(output, entries, text)


def _env_override() -> None:
    """IRQ_CONTEXT wins over the file's current_context: say so where it would surprise."""
    chosen = os.environ.get("IRQ_CONTEXT")
    if chosen:
        hint(f"note: IRQ_CONTEXT={chosen} is set and wins over current_context")


_TOP_CURRENT = re.compile(r"^[ \t]*current_context[ \t]*=.*$", re.MULTILINE)
_FIRST_TABLE = re.compile(r"^[ \t]*\[", re.MULTILINE)


def set_current_context(text: str, name: str) -> str:
    """``text`` with its top-level ``current_context`` set to ``name`` (added before the
    first table when it has none); nothing else of the file changes."""
    import tomli_w

    line = tomli_w.dumps({"current_context": name}).strip()
    first_table = _FIRST_TABLE.search(text)
    top_end = first_table.start() if first_table else len(text)
    found = _TOP_CURRENT.search(text, 0, top_end)
    if found is not None:
        return text[: found.start()] + line + text[found.end():]
    return line + "\n" + ("\n" if text.strip() else "") + text


@ctx_app.command("use", cls=IrqCommand)
def ctx_use_command(
    name: Annotated[
        str,
        typer.Argument(help="The context to make current.", autocompletion=_complete_contexts,
                       show_default=False),
    ],
    output: OutputOption = OutputFormat.TEXT,
) -> None:
    """Make NAME the current context (written to the config file)."""
    from console.config import ConfigError, config_path, parse_config, write_private_file

    config = _load()
    if name not in config.contexts:
        known = ", ".join(sorted(config.contexts)) or "none configured"
        fail(ExitCode.NOT_FOUND, f"unknown context {name!r} (known: {known})",
             hint="list them with `irq ctx list`")
    path: Path = config.path or config_path()
    text = path.read_text(encoding="utf-8")
    updated = set_current_context(text, name)
    try:
        check = parse_config(updated, path)
    except ConfigError as exc:  # never write a file we could not read back
        fail(ExitCode.FAILED, f"cannot set current_context in {path}: {exc}")
    if check.current_context != name:
        fail(ExitCode.FAILED, f"cannot set current_context in {path}: the file's layout hides "
             "it; set current_context by hand")
    if updated != text:
        write_private_file(path, updated)
    previous = config.current_context

    def done() -> None:
        diagnose(f"current context: {name}" + (f" (was {previous})" if previous and
                                                 previous != name else ""))
        _env_override()

    emit(output, {"current_context": name, "previous": previous, "path": str(path)}, done)
