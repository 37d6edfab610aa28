"""Rendering of CLI output: ``-o text`` (rich tables), ``-o json`` (one document), ``-o jsonl``.

Data goes to stdout, diagnostics to stderr. JSON output is exactly the ``contract()`` of the
domain types (docs/json-contract.md), so scripts can rely on the field names.

Text from agents, backends and other clients never reaches the terminal as it was written
(console/terminal_text.py): ``esc``/``styled`` make each value inert where it enters a table
or a line (so widths are measured on what is shown), ``hint`` does it for diagnostics, and
every rich console made here carries a render hook that does it once more for anything that
was printed without them. JSON escapes C1 controls, bidi overrides and lone surrogates as
``\\uXXXX`` (the decoded value is unchanged; C0 controls the encoder escapes itself).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from console.terminal_text import UNSAFE_IN_BLOCK, terminal_safe

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderResult
    from rich.table import Table


class OutputFormat(StrEnum):
    TEXT = "text"
    JSON = "json"
    JSONL = "jsonl"


class ExportFormat(StrEnum):
    """``-o`` of commands whose rows also export as CSV (``irq audit``)."""

    TEXT = "text"
    JSON = "json"
    JSONL = "jsonl"
    CSV = "csv"




def print_csv(rows: Iterable[dict[str, Any]], fields: Sequence[str]) -> None:
    """A header row of ``fields``, then one row per item (RFC 4180 quoting; characters a
    terminal acts on are written as ``\\uXXXX``, like JSON does)."""
    import csv

    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(fields)
    for row in rows:
        writer.writerow(
            [UNSAFE_IN_BLOCK.sub(_json_escape, "" if row.get(f) is None else str(row.get(f)))
             for f in fields]
        )
    sys.stdout.flush()


def _width(stream: Any) -> int | None:
    """None on a terminal (rich measures it); wide otherwise so pipes get whole lines."""
    if stream.isatty():
        return None
    try:
        return max(int(os.environ.get("COLUMNS", "0")), 240)
    except ValueError:
        return 240


def _inert_console(stream: Any) -> Console:
    from rich.console import Console, RenderHook

    class InertSegments:
        """Renders ``inner`` and makes control characters in its text visible (the backstop
        for text printed without ``esc``; layout was measured before, so a hostile value
        that took this path may wrap: it still reaches the terminal inert)."""

        def __init__(self, inner: ConsoleRenderable) -> None:
            self.inner = inner

        def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
            from rich.segment import Segment

            for segment in console.render(self.inner, options):
                if segment.control or not UNSAFE_IN_BLOCK.search(segment.text):
                    yield segment
                else:
                    yield Segment(terminal_safe(segment.text, multiline=True), segment.style)

    class InertHook(RenderHook):
        def process_renderables(
            self, renderables: list[ConsoleRenderable]
        ) -> list[ConsoleRenderable]:
            return [InertSegments(r) for r in renderables]

    console = Console(file=stream, width=_width(stream), highlight=False, soft_wrap=False)
    console.push_render_hook(InertHook())
    return console


def stdout_console() -> Console:
    return _inert_console(sys.stdout)


def stderr_console() -> Console:
    return _inert_console(sys.stderr)


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def dumps(obj: Any, *, indent: int | None = None, decoded_json: bool = False) -> str:
    """JSON, readable (non-ASCII stays as it is) but with nothing a terminal acts on.

    ``decoded_json``: ``obj`` holds only what a JSON decoder returns (dicts with string keys,
    lists, strings, numbers, booleans, None), as a gateway's answer does: see _json_text."""
    text = _json_text(obj, indent, decoded_json)
    if text.isascii() and "\x7f" not in text:
        # both encoders escape every C0 control inside strings, so the only ASCII character
        # UNSAFE_IN_BLOCK could find is DEL; checked in C (the regex took 0.04 s on 10 MB)
        return text
    return UNSAFE_IN_BLOCK.sub(_json_escape, text)


def _json_text(obj: Any, indent: int | None, decoded_json: bool = False) -> str:
    """Exactly ``json.dumps(obj, indent=indent, default=str, ensure_ascii=False)``, faster.

    With an indent, the standard library encodes in pure Python (its C encoder has none on
    3.11): ``irq runs -o json`` at 10,000 runs is a 10 MB document and took 0.2-0.3 s to
    encode. orjson writes the same two-space layout in ~0.01 s, but formats some values its own
    way (floats under 1e-4, NaN, plain Enum members, datetimes, big ints...). So its text is
    used only when its compact form equals the C encoder's compact form, value for value
    (~0.06 s): then the indented texts are equal too. Anything else takes the standard path.
    """
    if indent == 2 and decoded_json:
        try:
            import orjson

            text: str = orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode()
            if _floats_as_stdlib(text):
                return text
        except Exception:  # noqa: BLE001 - not importable, or an int beyond 64 bits
            pass
    if indent == 2:
        try:
            import orjson

            compact = json.dumps(obj, separators=(",", ":"), default=str, ensure_ascii=False)
            if orjson.dumps(obj, default=str).decode() == compact:
                return orjson.dumps(obj, default=str, option=orjson.OPT_INDENT_2).decode()
        except Exception:  # noqa: BLE001 - not importable, or a value it refuses: the stdlib
            pass
    return json.dumps(obj, indent=indent, default=str, ensure_ascii=False)


def _floats_as_stdlib(text: str) -> bool:
    """Does orjson's ``text`` of decoded JSON values equal the standard library's? Of such
    values orjson writes only a float under 1e-4 otherwise (0.00001 or 4.5e-6, not 1e-05 or
    4.5e-06; strings, integers and the other floats are written alike): every such float has
    "0.0000" or a digit then "e-" in its text. A string holding either merely takes the slow
    path. Searched with str methods in C (a regex took 0.17 s on 10 MB)."""
    if "0.0000" in text:
        return False
    at = text.find("e-")
    while at != -1:
        if at > 0 and text[at - 1].isdigit():
            return False
        at = text.find("e-", at + 2)
    return True


def print_json(obj: Any, *, decoded_json: bool = False) -> None:
    sys.stdout.write(dumps(obj, indent=2, decoded_json=decoded_json) + "\n")
    sys.stdout.flush()


def print_jsonl(items: Iterable[Any]) -> None:
    for item in items:
        sys.stdout.write(dumps(item) + "\n")
    sys.stdout.flush()


def emit(
    fmt: OutputFormat,
    data: list[dict[str, Any]] | dict[str, Any],
    render_text: Callable[[], None],
    *,
    decoded_json: bool = False,
) -> None:
    """Print ``data`` as json/jsonl, or call ``render_text`` for ``-o text``.
    ``decoded_json``: ``data`` is as a JSON decoder returned it (see dumps).

    A dict is one object (jsonl: one line); a list is an array (jsonl: one line per item).
    """
    if fmt is OutputFormat.JSON:
        print_json(data, decoded_json=decoded_json)
    elif fmt is OutputFormat.JSONL:
        print_jsonl(data if isinstance(data, list) else [data])
    else:
        render_text()


def hint(text: str) -> None:
    """A suggested next command (restate CLI style), on stderr so pipes stay clean."""
    print(terminal_safe(text, multiline=True), file=sys.stderr, flush=True)


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
    shown = escape(terminal_safe(value))
    return f"[{style}]{shown}[/]" if style else shown


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
    """A value for rich markup on one line: control characters visible, markup escaped."""
    from rich.markup import escape

    return escape(terminal_safe("" if value is None else str(value)))


def print_table(table: Table) -> None:
    stdout_console().print(table)


def print_text(markup: str = "") -> None:
    stdout_console().print(markup)
