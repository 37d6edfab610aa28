"""Rendering of CLI output: ``-o text`` (rich tables), ``-o json`` (one document), ``-o jsonl``.

Data goes to stdout, diagnostics to stderr. JSON output is exactly the ``contract()`` of the
domain types (DESIGN.md §5), so scripts can rely on the field names.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


class OutputFormat(StrEnum):
    TEXT = "text"
    JSON = "json"
    JSONL = "jsonl"


OutputOption = Annotated[
    OutputFormat,
    typer.Option(
        "--output",
        "-o",
        help="text (tables), json (one document) or jsonl (one object per line).",
        case_sensitive=False,
    ),
]


def _width(stream: Any) -> int | None:
    """None on a terminal (rich measures it); wide otherwise so pipes get whole lines."""
    if stream.isatty():
        return None
    try:
        return max(int(os.environ.get("COLUMNS", "0")), 240)
    except ValueError:
        return 240


def stdout_console() -> Console:
    from rich.console import Console

    return Console(file=sys.stdout, width=_width(sys.stdout), highlight=False, soft_wrap=False)


def stderr_console() -> Console:
    from rich.console import Console

    return Console(file=sys.stderr, width=_width(sys.stderr), highlight=False, soft_wrap=False)


def dumps(obj: Any, *, indent: int | None = None) -> str:
    return json.dumps(obj, indent=indent, default=str, ensure_ascii=False)


def print_json(obj: Any) -> None:
    sys.stdout.write(dumps(obj, indent=2) + "\n")
    sys.stdout.flush()


def print_jsonl(items: Iterable[Any]) -> None:
    for item in items:
        sys.stdout.write(dumps(item) + "\n")
    sys.stdout.flush()


def emit(
    fmt: OutputFormat,
    data: list[dict[str, Any]] | dict[str, Any],
    render_text: Callable[[], None],
) -> None:
    """Print ``data`` as json/jsonl, or call ``render_text`` for ``-o text``.

    A dict is one object (jsonl: one line); a list is an array (jsonl: one line per item).
    """
    if fmt is OutputFormat.JSON:
        print_json(data)
    elif fmt is OutputFormat.JSONL:
        print_jsonl(data if isinstance(data, list) else [data])
    else:
        render_text()


def hint(text: str) -> None:
    """A suggested next command (restate CLI style), on stderr so pipes stay clean."""
    print(text, file=sys.stderr, flush=True)


def suggest(commands: Sequence[str]) -> None:
    if not commands:
        return
    hint("next:")
    for command in commands:
        hint(f"  {command}")


# ------------------------------------------------------------------------------ formatting


def fmt_age(seconds: float | None) -> str:
    """3.2s, 4m10s, 2h05m, 3d04h; '-' when unknown."""
    if seconds is None:
        return "-"
    if seconds < 10:
        return f"{seconds:.1f}s"
    total = int(seconds)
    if total < 60:
        return f"{total}s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def fmt_progress(progress: float | None) -> str:
    if progress is None:
        return "-"
    value = progress * 100 if progress <= 1 else progress
    return f"{value:.0f}%"


def fmt_time(iso: str | None) -> str:
    """An ISO timestamp shortened for tables (date and seconds, no microseconds)."""
    if not iso:
        return "-"
    text = iso.replace("T", " ")
    head, dot, rest = text.partition(".")
    if dot:
        tz = ""
        for sign in ("+", "-"):
            if sign in rest:
                tz = sign + rest.split(sign, 1)[1]
                break
        text = head + tz
    return text.replace("+00:00", "Z")


STATE_STYLES: dict[str, str] = {
    "running": "green",
    "late": "yellow",
    "lost": "bold red",
    "waiting": "cyan",
    "pausing": "magenta",
    "paused": "magenta",
    "backing_off": "yellow",
    "cancelling": "red",
    "completed": "dim",
    "failed": "red",
    "cancelled": "dim",
    "terminated": "dim",
    "applied": "green",
    "conflict": "yellow",
    "forbidden": "red",
    "pending": "cyan",
    "decided": "dim",
    "withdrawn": "dim",
}


def styled(value: str) -> str:
    from rich.markup import escape

    style = STATE_STYLES.get(value)
    return f"[{style}]{escape(value)}[/]" if style else escape(value)


def make_table(*columns: str) -> Table:
    """A borderless table with upper-case headers (kubectl/temporal CLI look)."""
    from rich import box
    from rich.table import Table

    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        header_style="bold",
        expand=False,
    )
    for name in columns:
        table.add_column(name.upper(), overflow="fold")
    return table


def esc(value: object) -> str:
    from rich.markup import escape

    return escape("" if value is None else str(value))


def print_table(table: Table) -> None:
    stdout_console().print(table)


def print_text(markup: str = "") -> None:
    stdout_console().print(markup)
