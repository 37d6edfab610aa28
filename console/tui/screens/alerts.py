"""Alerts: conditions that need a person (stalled, retrying, given up, no workers, liveness
unknown, interrupt or obligation overdue, ...): open first, then acknowledged, then recently
cleared. ``k`` acknowledges the selected open alert through the confirm dialog (the reason is
required); ``s`` silences the selected alert for a time (the dialog asks how long, as ``irq
alerts silence --for``). Details come from agents and backends: shown inert
(terminal_text.py)."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from console.alert_model import Alert
from console.terminal_text import terminal_safe
from console.tui.inert_text import inert
from console.tui.messages import FleetChange
from console.tui.screens import mutation_flows, named_flows
from console.tui.screens.base import ViewScreen, selected_row_key
from console.tui.widgets.alert_bar import about_label, detail_without_run
from console.tui.widgets.table_fit import fit_columns

STATE_STYLE = {"open": "bold red", "acknowledged": "yellow", "cleared": "dim"}
_ORDER = {"open": 0, "acknowledged": 1, "cleared": 2}


def ordered(alerts: list[Alert]) -> list[Alert]:
    """Open, acknowledged, cleared; newest first within each."""
    by_time = sorted(alerts, key=lambda a: a.raised_at, reverse=True)
    return sorted(by_time, key=lambda a: _ORDER.get(a.state, 3))


def state_cell(alert: Alert, now: datetime) -> Text:
    text = Text(alert.state, style=STATE_STYLE.get(alert.state, ""))
    if alert.silenced(now):
        text.append(" (s)", style="dim")
    return text


def alert_detail(alert: Alert, now: datetime) -> Text:
    text = Text()
    text.append(inert(alert.detail or alert.kind, "bold"))
    rows = [("kind", inert(alert.kind)), ("state", state_cell(alert, now)),
            ("about", inert(alert.run or alert.subject)),
            ("since", Text(alert.since.isoformat(timespec="seconds")))]
    if alert.action:
        rows.append(("to do", inert(alert.action)))
    if alert.acked_by:
        rows.append(("acked", inert(f"{alert.acked_by}: {alert.ack_reason}")))
    if alert.silenced(now) and alert.silenced_until is not None:
        rows.append(("silent", Text(f"until {alert.silenced_until.isoformat(timespec='seconds')}"
                                    f" ({terminal_safe(alert.silenced_by or '')})")))
    rows.append(("id", inert(alert.id, "dim")))
    for label, value in rows:
        text.append(f"\n{label:<7}", style="bold")
        text.append(value)
    return text


class AlertsScreen(ViewScreen):
    VIEW_NAME = "alerts"

    BINDINGS = [Binding("k", "ack", "ack", id="alert_ack"),
                Binding("s", "silence", "silence", id="alert_silence")]

    def __init__(self) -> None:
        super().__init__()
        self._filter = ""
        self._shown: list[str] = []

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield Static("", id="alerts-title", classes="view-title")
        yield DataTable(cursor_type="row", id="alerts-table", zebra_stripes=False)
        yield Static("", id="alert-detail")
        yield from self.compose_bottom()

    @property
    def table(self) -> DataTable[str | Text]:
        return self.query_one("#alerts-table", DataTable)

    def on_mount(self) -> None:
        super().on_mount()
        t = self.table
        t.add_column("STATE", key="state", width=13)
        t.add_column("KIND", key="kind", width=18)
        t.add_column("ABOUT", key="about", width=22)
        t.add_column("DETAIL", key="detail", width=30)
        self._rebuild()
        t.focus()

    def on_resize(self) -> None:
        fit_columns(self.table, self.size.width, {"state": 13, "kind": 18},
                    {"about": (2, 8), "detail": (4, 12)})

    def focus_main(self) -> None:
        self.table.focus()

    def _items(self) -> list[Alert]:
        items = ordered(list(self.irq.view.alerts.values()))
        if self._filter:
            words = self._filter.lower().split()
            items = [a for a in items if all(
                w in f"{a.id} {a.kind} {a.state} {a.subject} {a.detail}".lower()
                for w in words)]
        return items

    def _rebuild(self) -> None:
        table = self.table
        selected = selected_row_key(table)
        now = self.irq.clock()
        items = self._items()
        table.clear()
        for a in items:
            # ABOUT names the run: the detail cell starts where the run's name ends
            table.add_row(state_cell(a, now), inert(a.kind), inert(about_label(a)),
                          inert(detail_without_run(a)[1]), key=a.id)
        self._shown = [a.id for a in items]
        if selected in self._shown:
            table.move_cursor(row=self._shown.index(selected), animate=False)
        active = [a for a in items if a.state != "cleared"]
        title = Text(f" Alerts: {sum(1 for a in active if a.state == 'open')} open, "
                     f"{sum(1 for a in active if a.state == 'acknowledged')} acknowledged",
                     style="bold")
        if self._filter:
            title.append(terminal_safe(f"  /{self._filter} ({len(items)} shown)"))
        self.query_one("#alerts-title", Static).update(title)
        self._show_detail()
        self.refresh_bindings()

    def selected_alert(self) -> Alert | None:
        key = selected_row_key(self.table)
        return self.irq.view.alerts.get(key) if key is not None else None

    def selected_run_ids(self) -> list[str]:
        return []

    def _show_detail(self) -> None:
        detail = self.query_one("#alert-detail", Static)
        alert = self.selected_alert()
        if alert is None:
            detail.update(Text("No alerts: nothing needs a person right now.", style="dim"))
            return
        detail.update(alert_detail(alert, self.irq.clock()))

    def fleet_changed(self, change: FleetChange) -> None:
        if change.alerts or change.runs is None:
            self._rebuild()

    def current_filter(self) -> str:
        return self._filter

    def apply_filter(self, text: str) -> None:
        self._filter = text.strip()
        self._rebuild()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "ack":
            if self.irq.mutation_pending:
                return False
            alert = self.selected_alert()
            if alert is None or alert.state != "open":
                return None
            return True if self.irq.may_mutate()[0] else None
        if action == "silence":
            if self.irq.mutation_pending:
                return False
            alert = self.selected_alert()
            if alert is None or alert.state == "cleared":
                return None
            return True if self.irq.may_mutate()[0] else None
        return super().check_action(action, parameters)

    def action_silence(self) -> None:
        irq = self.irq
        alert = self.selected_alert()
        allowed, why = irq.may_mutate()
        if alert is None or alert.state == "cleared":
            irq.notify("silence: no open or acknowledged alert selected", severity="warning")
            return
        if not allowed:
            irq.notify(f"silence: {why}", title="Not allowed", severity="error")
            return
        if irq.mutation_pending:
            return
        irq.run_mutation(named_flows.alert_silence_steps(irq, alert.id), "_alert_flow")

    def action_ack(self) -> None:
        irq = self.irq
        alert = self.selected_alert()
        allowed, why = irq.may_mutate()
        if alert is None or alert.state != "open":
            irq.notify("acknowledge: no open alert selected", severity="warning")
            return
        if not allowed:
            irq.notify(f"acknowledge: {why}", title="Not allowed", severity="error")
            return
        if irq.mutation_pending:
            return
        irq.run_mutation(mutation_flows.alert_ack_steps(irq, alert.id), "_alert_flow")

    @on(DataTable.RowHighlighted, "#alerts-table")
    def _highlighted(self) -> None:
        self._show_detail()
        self.refresh_bindings()

    @on(DataTable.RowSelected, "#alerts-table")
    def _selected(self) -> None:
        alert = self.selected_alert()
        if alert is not None and alert.run and alert.run in self.irq.view.runs:
            self.irq.open_run(alert.run)
