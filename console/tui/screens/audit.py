"""Recent commands: when, who (and role), what, on which target, why, and the outcome."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from console.client import GatewayError
from console.model import AuditEntry
from console.terminal_text import terminal_safe
from console.tui.inert_text import inert
from console.tui.messages import FleetChange
from console.tui.screens.base import ViewScreen
from console.tui.widgets.plan_view import plan_text
from console.tui.widgets.table_fit import fit_columns

OUTCOME_STYLE = {"applied": "green", "conflict": "yellow", "failed": "bold red",
                 "forbidden": "bold red"}


class AuditScreen(ViewScreen):
    VIEW_NAME = "audit"

    def __init__(self) -> None:
        super().__init__()
        self._filter = ""
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield Static("", id="audit-title", classes="view-title")
        table: DataTable[str | Text] = DataTable(cursor_type="row", id="audit-table")
        yield table
        yield Static("", id="audit-detail")
        yield from self.compose_bottom()

    @property
    def table(self) -> DataTable[str | Text]:
        return self.query_one("#audit-table", DataTable)

    def on_mount(self) -> None:
        super().on_mount()
        t = self.table
        t.add_column("AT", key="at", width=8)
        t.add_column("WHO", key="who", width=16)
        t.add_column("ACTION", key="action", width=9)
        t.add_column("OUTCOME", key="outcome", width=9)
        t.add_column("TARGET", key="target", width=30)
        t.add_column("REASON", key="reason")
        t.focus()
        self._rebuild()
        self.load()

    def on_resize(self) -> None:
        fit_columns(self.table, self.size.width, {"at": 8, "action": 9, "outcome": 9},
                    {"who": (1, 10), "target": (2, 14), "reason": (2, 10)})

    def focus_main(self) -> None:
        self.table.focus()

    @work(exclusive=True, group="audit")
    async def load(self) -> None:
        try:
            data = await self.irq.source.query("audit", limit=200)
        except GatewayError as exc:
            self.error = exc.message
        else:
            self.error = None
            entries = []
            for raw in data or []:
                try:
                    entries.append(AuditEntry.model_validate(raw))
                except ValueError:
                    continue
            self.irq.merge_audit(entries)
        self._rebuild()

    def _entries(self) -> list[AuditEntry]:
        entries = list(reversed(self.irq.audit))
        if self._filter:
            words = self._filter.lower().split()
            entries = [e for e in entries if all(
                w in f"{e.identity} {e.role} {e.action} {e.target} {e.reason} {e.outcome}"
                .lower() for w in words)]
        return entries

    def _rebuild(self) -> None:
        t = self.table
        t.clear()
        entries = self._entries()
        for i, e in enumerate(entries):
            style = OUTCOME_STYLE.get(e.outcome, "")
            t.add_row(e.at.strftime("%H:%M:%S"), inert(f"{e.identity}:{e.role}"),
                      inert(e.action), inert(e.outcome, style), inert(e.target),
                      inert(e.reason) if e.reason else Text("-", style="dim"), key=str(i))
        self._entries_shown = entries
        title = f" Audit: {len(entries)} recent commands, newest first"
        if self._filter:
            title += f"  /{self._filter}"
        if self.error:
            title += f"  ({self.irq.glyphs.stale} {self.error})"
        self.query_one("#audit-title", Static).update(inert(title, "bold"))
        self._show_detail()

    def _show_detail(self) -> None:
        detail = self.query_one("#audit-detail", Static)
        entries = getattr(self, "_entries_shown", [])
        row = self.table.cursor_row
        if not entries or row is None or row >= len(entries):
            detail.update("")
            return
        e = entries[row]
        text = Text()
        text.append(inert(f"{e.action} {e.target}", "bold"))
        text.append("\n")
        text.append(inert(f"by {e.identity} ({e.role}) at {e.at.isoformat(timespec='seconds')}: "))
        text.append(inert(e.outcome, OUTCOME_STYLE.get(e.outcome, "")))
        if e.detail:
            text.append(f" {self.irq.glyphs.dash} {terminal_safe(e.detail)}")
        if e.reason:
            text.append(f"\nreason: {terminal_safe(e.reason)}")
        if e.plan:
            from console.model import ActionPlan

            try:
                text.append("\n")
                text.append(plan_text(ActionPlan.model_validate(e.plan), self.irq.glyphs,
                                      targets=False))
            except ValueError:
                pass
        detail.update(text)

    @on(DataTable.RowHighlighted, "#audit-table")
    def _highlighted(self) -> None:
        self._show_detail()

    def fleet_changed(self, change: FleetChange) -> None:
        if change.audit or change.runs is None:
            self._rebuild()

    def current_filter(self) -> str:
        return self._filter

    def apply_filter(self, text: str) -> None:
        self._filter = text.strip()
        self._rebuild()
