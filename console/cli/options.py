"""The options many ``irq`` commands share, declared once (typer ``Annotated`` aliases).

A flag means one thing everywhere (tests/cli/test_help_and_flags.py): a command takes the
alias (``reason: ReasonOption = ""``) instead of declaring ``--reason`` again, so its help
text, short form and panel cannot drift between commands. Options one command (or one
module) owns stay there.
"""

from __future__ import annotations

from typing import Annotated

import typer

from console.cli.output import ExportFormat, OutputFormat

# ------------------------------------------------------------------------- connection

# The connection options are accepted after the subcommand too (``irq runs --url …``);
# there they win over the ones given before it. Environment variables apply at the root
# (console/cli/app.py declares those, with their env vars).
_CONNECTION_PANEL = "Connection"
UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="Gateway URL (also IRQ_URL).",
        rich_help_panel=_CONNECTION_PANEL,
        show_default=False,
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        help="Bearer token (also IRQ_TOKEN).",
        rich_help_panel=_CONNECTION_PANEL,
        show_default=False,
    ),
]
ContextOption = Annotated[
    str | None,
    typer.Option(
        "--context",
        "-c",
        help="Context from the config file (also IRQ_CONTEXT).",
        rich_help_panel=_CONNECTION_PANEL,
        show_default=False,
    ),
]

# ----------------------------------------------------------------------------- output

OutputOption = Annotated[
    OutputFormat,
    typer.Option(
        "--output",
        "-o",
        help="text (tables), json (one document) or jsonl (one object per line).",
        case_sensitive=False,
    ),
]
#: ``-o`` of commands whose rows also export as CSV (``irq audit``)
ExportOption = Annotated[
    ExportFormat,
    typer.Option(
        "--output",
        "-o",
        help="text (tables), json (one document), jsonl (one object per line) or csv (a "
        "header row, then one row per item).",
        case_sensitive=False,
    ),
]

# -------------------------------------------------------------------------- mutations

ReasonOption = Annotated[
    str, typer.Option("--reason", "-r", help="Why (recorded in the audit trail).")
]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
DryRunOption = Annotated[
    bool,
    typer.Option(
        "--dry-run", help="Show what would happen (the plan, or the decision); change nothing."
    ),
]
KeyOption = Annotated[
    str | None,
    typer.Option(
        "--key",
        help="Idempotency key: repeating a command with the same key never applies it twice.",
    ),
]

#: ``--wait`` given without a number (console/cli/wait.py: ``bare_wait``)
DEFAULT_WAIT_S = 300.0

WaitOption = Annotated[
    float | None,
    typer.Option(
        "--wait",
        metavar="[SECONDS]",
        help="Block until the effect is observed (paused with releases confirmed, ended, "
        "running, decision consumed), at most SECONDS (e.g. --wait 120; --wait alone: "
        f"{DEFAULT_WAIT_S:g}); a timeout exits 7.",
        show_default=False,
        min=0.0,
    ),
]

# ---------------------------------------------------------------------------- filters

#: ``--filter EXPR`` of the listings (irq runs, irq inbox)
ListFilterOption = Annotated[
    str | None,
    typer.Option(
        "--filter",
        metavar="EXPR",
        help="Only what this filter selects (the TUI's / grammar: text, state:, backend:, "
        "ctx:, has:, name:, resource:, tool:, version:, error:, age>10m, created>2h; "
        "- negates).",
    ),
]
#: ``--filter EXPR`` of the mutations (act on what it selects instead of ids)
TargetFilterOption = Annotated[
    str | None,
    typer.Option(
        "--filter",
        metavar="EXPR",
        help="Act on every item this filter selects instead of ids (the TUI's / grammar: "
        "text, state:, backend:, ctx:, has:, name:, resource:, tool:, version:, error:, "
        "age>10m, created>2h). Lists the targets and the plan, asks once; the gateway then "
        "runs it as a job (irq jobs).",
        show_default=False,
    ),
]
MaxOption = Annotated[
    int,
    typer.Option(
        "--max",
        metavar="N",
        min=1,
        help="With --filter: above N items the confirmation asks for the count to be typed; "
        "with --yes, more than N are refused.",
    ),
]


def parse_rate(text: str | None) -> float | None:
    """``--rate 20/s`` or ``--rate 20`` -> 20.0 (targets per second)."""
    if text is None:
        return None
    body = text.strip().lower().removesuffix("/s")
    try:
        rate = float(body)
    except ValueError:
        rate = 0.0
    if not rate > 0:
        raise typer.BadParameter(f"{text!r}: give a rate such as 20/s", param_hint="--rate")
    return rate


RateOption = Annotated[
    str | None,
    typer.Option(
        "--rate",
        metavar="N/s",
        help="With --filter: the job sends N targets per second (default: the gateway's).",
        show_default=False,
    ),
]
DetachOption = Annotated[
    bool,
    typer.Option(
        "--detach",
        help="With --filter: return once the gateway recorded the job (follow it with "
        "`irq jobs show ID`) instead of following it to its end.",
    ),
]

# ----------------------------------------------------------------------- native waits

_NATIVE_PANEL = "Native waits"
HandlerOption = Annotated[
    str | None,
    typer.Option(
        "--handler",
        help="Which handler answers a native wait (a Temporal signal or update, a Restate "
        "workflow's shared handler); needed when `irq show` lists several.",
        rich_help_panel=_NATIVE_PANEL,
        show_default=False,
    ),
]
TopicOption = Annotated[
    str | None,
    typer.Option(
        "--topic",
        help="The topic a DBOS workflow waits on in recv(topic) (default: DBOS's default "
        "topic; a pending recv does not record its topic).",
        rich_help_panel=_NATIVE_PANEL,
        show_default=False,
    ),
]
