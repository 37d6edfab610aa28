"""``?``: the keys of the screen underneath (as remapped by the config file), the filter
syntax and the ``:`` commands. Esc, ``?`` or ``q`` closes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.dom import DOMNode
from textual.geometry import Size
from textual.screen import ModalScreen
from textual.strip import Strip
from textual.widgets import Static

from console.tui.command_line import SPECS
from console.tui.textual_internals import StripCachedStatic

if TYPE_CHECKING:
    from console.tui.screens.base import ViewScreen


@dataclass(frozen=True)
class KeyHelp:
    keys: str
    description: str
    binding_id: str
    status: str  # "" | "not allowed" | "nothing selected"


FILTER_HELP = (
    ("text", "every word must appear in id, name, native state, step or warnings"),
    ("state:late,lost", "state is one of (prefixes work; active = not finished)"),
    ("backend:dbos", "backend (prefix)"),
    ("ctx:prod", "context"),
    ("has:interrupt", "also: warning, resource, leak, preempted"),
    ("created>2h error:timeout", "run start age; also version:, age<30s, state:failed"),
    ("-state:completed", "a leading - negates a term"),
)


def class_bindings(node: DOMNode) -> list[Binding]:
    """The bindings ``node``'s own classes declare (not Textual's)."""
    out: list[Binding] = []
    for cls in type(node).__mro__:
        if cls.__module__.startswith("textual"):
            continue  # Textual's own scrolling keys: not ours to document
        for item in cls.__dict__.get("BINDINGS", []):
            if isinstance(item, Binding):
                out.append(item)
    return out


def key_rows(screen: ViewScreen, keymap: dict[str, str],
             key_display: Callable[[str], str]) -> list[KeyHelp]:
    """The keys of ``screen``, its focused widget and the app, as ``keymap`` remaps them,
    each with why it cannot run now (not allowed, nothing selected)."""
    rows: list[KeyHelp] = []
    seen: set[str] = set()
    nodes: list[DOMNode] = [screen]
    if screen.focused is not None:
        nodes.append(screen.focused)
    nodes.append(screen.app)
    for node in nodes:
        for binding in class_bindings(node):
            bid = binding.id or binding.action
            if bid in seen or binding.system:
                continue
            seen.add(bid)
            keys = keymap.get(binding.id or "", binding.key)
            display = " ".join(key_display(k) for k in keys.split(","))
            status = ""
            state = screen.check_action(binding.action.split("(")[0], ())
            if state is None:
                status = screen.not_allowed_reason(binding.action)
            elif state is False:
                status = "nothing selected"
            rows.append(KeyHelp(display, binding.description, bid, status))
    rows.append(KeyHelp(key_display("ctrl+p"), "command palette", "command_palette", ""))
    rows.append(KeyHelp(key_display("ctrl+q"), "quit", "quit", ""))
    return rows


def keys_table(rows: list[KeyHelp]) -> Table:
    table = Table(box=None, show_edge=False, pad_edge=False, expand=True)
    table.add_column("KEY", style="bold", no_wrap=True)
    table.add_column("ACTION")
    table.add_column(Text("ID ([keys] in config.toml)"), style="dim", no_wrap=True)
    for row in rows:
        desc = Text(row.description)
        if row.status:
            desc.append(f"  ({row.status})", style="yellow")
        table.add_row(row.keys, desc, row.binding_id)
    return table


def reference() -> Group:
    filters = Table(box=None, show_edge=False, pad_edge=False, expand=True)
    filters.add_column("FILTER", style="bold", no_wrap=True)
    filters.add_column("MEANS")
    for term, means in FILTER_HELP:
        filters.add_row(term, means)
    commands = Table(box=None, show_edge=False, pad_edge=False, expand=True)
    commands.add_column("COMMAND", style="bold", no_wrap=True)
    commands.add_column("DOES")
    for spec in SPECS:
        aliases = f" (:{', :'.join(spec.aliases)})" if spec.aliases else ""
        commands.add_row(spec.usage, spec.help + aliases)
    return Group(Text(""), filters, Text(""), commands)


class RenderedOnce:
    """A Rich renderable drawn once per width: Textual measures and renders a screen's
    content several times while it lays out a new screen, and the reference tables never
    change (the keys change only between openings)."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable
        self._lines: dict[int, list[list[Segment]]] = {}
        self._measures: dict[tuple[int, int], Measurement] = {}
        #: what a widget showing it made of it (OnceStatic): strips per (size, style), and
        #: the content height per width
        self.strips: dict[tuple[Any, ...], list[Strip]] = {}
        self.heights: dict[int, int] = {}

    def _render(self, console: Console, options: ConsoleOptions) -> list[list[Segment]]:
        lines = self._lines.get(options.max_width)
        if lines is None:
            lines = console.render_lines(self.renderable, options, pad=False)
            self._lines[options.max_width] = lines
        return lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        new_line = Segment.line()
        for line in self._render(console, options):
            yield from line
            yield new_line

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        key = (options.min_width, options.max_width)
        measure = self._measures.get(key)
        if measure is None:
            measure = self._measures[key] = Measurement.get(console, options, self.renderable)
        return measure


class OnceStatic(StripCachedStatic):
    """A Static showing a :class:`RenderedOnce`: its strips and height are kept on the
    renderable, so a help screen opened again draws from them. Textual renders a Static's
    whole content to strips on first paint and again to measure its height; for the help
    text that was most of what ``?`` cost at 200x50 (the tables are 80+ lines). The strips
    are served through Textual's private render path (``textual_internals.py``)."""

    def __init__(self, content: RenderedOnce, *, id: str | None = None) -> None:
        super().__init__(content, id=id)
        self.once = content

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        height = self.once.heights.get(width)
        if height is None:
            height = self.once.heights[width] = super().get_content_height(
                container, viewport, width)
        return height

    def reuse_strips(self, key: tuple[Any, ...], make: Callable[[], list[Strip]]
                     ) -> list[Strip]:
        strips = self.once.strips.get(key)
        if strips is None:
            if len(self.once.strips) >= 8:
                self.once.strips.clear()
            strips = make()
            self.once.strips[key] = strips
        return strips


_REFERENCE: RenderedOnce | None = None
_KEYS: dict[tuple[KeyHelp, ...], RenderedOnce] = {}


def keys_once(rows: list[KeyHelp]) -> RenderedOnce:
    """The keys table for ``rows``, rendered once per width: opening help again on the same
    screen (same keys, same statuses) reuses the lines (a Rich table of 30 rows takes tens of
    milliseconds to lay out, most of what a key press to help cost)."""
    key = tuple(rows)
    table = _KEYS.get(key)
    if table is None:
        if len(_KEYS) >= 32:
            _KEYS.clear()
        table = _KEYS[key] = RenderedOnce(keys_table(rows))
    return table


def reference_once() -> RenderedOnce:
    """The filter and ``:`` command reference, rendered once per width for the process."""
    global _REFERENCE
    if _REFERENCE is None:
        _REFERENCE = RenderedOnce(reference())
    return _REFERENCE


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,question_mark,q", "close", "close", id="help_close"),
    ]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > #dialog {
        width: 100; max-width: 100%; height: auto; max-height: 100%;
        border: round $primary; padding: 0 1; background: $surface;
    }
    HelpScreen.-ascii > #dialog { border: ascii $primary; }
    HelpScreen #help-body { height: auto; max-height: 100%; }
    """

    def __init__(self, title: str, rows: list[KeyHelp], ascii_only: bool = False) -> None:
        super().__init__()
        self.title_text = title
        self.rows = rows
        self.set_class(ascii_only, "-ascii")

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(f"Keys: {self.title_text}   (esc closes)", style="bold"))
            with VerticalScroll(id="help-body"):
                yield OnceStatic(keys_once(self.rows), id="help-keys")
                yield OnceStatic(reference_once(), id="help-reference")

    def on_mount(self) -> None:
        self.query_one("#help-body").focus()

    def on_screen_resume(self) -> None:
        """Opened again (the app keeps it installed): from the top, like a new one."""
        try:
            body = self.query_one("#help-body", VerticalScroll)
        except NoMatches:  # the first opening: not composed yet (on_mount focuses it)
            return
        body.scroll_home(animate=False, immediate=True)
        body.focus()

    def action_close(self) -> None:
        self.dismiss(None)
