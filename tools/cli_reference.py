"""``make docs``: docs/cli-reference.md, written from the typer app itself.

    python -m tools.cli_reference [--out docs/cli-reference.md]   # without --out: stdout

Walks the click command tree typer builds from ``console.cli.app.app`` and prints, for every
command and group, its usage line, its help and each argument and option as ``--help`` shows
them (the same help records, defaults and ranges). The reference is never edited by hand: the
options are declared in ``console/cli`` and change there, so ``tests/unit/test_docs.py``
regenerates it and fails when the committed file differs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from console.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "cli-reference.md"

HEADER = """\
# irq command reference

Every command, argument and option of `irq`, as `irq COMMAND --help` prints them (every
command also takes `-h/--help`). Generated
from the typer app in `console/cli/` by `make docs` (`tools/cli_reference.py`); do not edit
by hand: `tests/unit/test_docs.py` fails when this file and the code disagree.

Common to every command that talks to a gateway: `--url`, `--token`, `-c/--context` (flag >
environment `IRQ_URL`/`IRQ_TOKEN`/`IRQ_CONTEXT` > config file), `-o text|json|jsonl` (the
JSON field names are a contract: [json-contract.md](json-contract.md)). Exit codes: 0 ok,
1 failed, 2 usage, 3 not found, 4 conflict, 5 unauthorized or forbidden, 6 gateway or backend
unreachable, 7 timed out waiting (`--wait`). The operator's guide shows them at work:
[operator-guide.md](operator-guide.md).
"""


# typer 0.29 builds its commands on a click it vendors (``typer._click``), not on the installed
# click: the tree is walked through the methods every click command has (``list_commands`` on
# groups, ``param_type_name`` on parameters), never through click's classes.
Command = Any


def subcommands(command: Command, ctx: typer.Context) -> list[tuple[str, Command]]:
    """A group's visible subcommands in the order ``--help`` lists them; none for a command."""
    if not hasattr(command, "list_commands"):
        return []
    found = ((name, command.get_command(ctx, name)) for name in command.list_commands(ctx))
    return [(name, sub) for name, sub in found if sub is not None and not sub.hidden]


def walk(command: Command, ctx: typer.Context) -> Iterator[tuple[Command, typer.Context]]:
    """``command`` and then every visible subcommand, depth first."""
    yield command, ctx
    for name, sub in subcommands(command, ctx):
        yield from walk(sub, typer.Context(sub, info_name=name, parent=ctx))


def section(command: Command, ctx: typer.Context) -> list[str]:
    path = ctx.command_path
    depth = min(path.count(" ") + 1, 4)  # irq: ##, irq policy: ###, irq policy explain: ####
    lines = [f"{'#' * (depth + 1)} {path}", "", "```", command.get_usage(ctx), "```", ""]
    if command.help:
        lines += [_inline(command.help), ""]
    arguments: list[str] = []
    options: list[str] = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None or param.name == "help":  # every command takes -h/--help
            continue
        names, text = record
        item = f"- `{names}`" + (f": {_inline(text)}" if text else "")
        (arguments if param.param_type_name == "argument" else options).append(item)
    if arguments:
        lines += ["Arguments:", "", *arguments, ""]
    if options:
        lines += ["Options:", "", *options, ""]
    subs = subcommands(command, ctx)
    if subs:
        lines += ["Commands: " + ", ".join(f"`{path} {name}`" for name, _ in subs), ""]
    return lines


def _inline(text: str) -> str:
    """Help text as markdown: paragraphs kept, ``\\b`` (click's no-rewrap mark) dropped, and
    characters markdown would read as markup outside code spans left as they are (help text
    is prose written for a terminal; it has none that matter)."""
    paragraphs = [" ".join(p.replace("\b", "").split()) for p in text.strip().split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p)


def reference() -> str:
    root = typer.main.get_command(app)
    ctx = typer.Context(root, info_name="irq")
    lines = [HEADER]
    for command, sub_ctx in walk(root, ctx):
        lines += section(command, sub_ctx)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, help="write here instead of stdout")
    args = parser.parse_args(argv)
    text = reference()
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
