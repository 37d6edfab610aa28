"""Alerts: conditions that need a person (stalled, retrying, given up, no workers, liveness
unknown, interrupt or obligation overdue, ...): open first, then acknowledged, then recently
cleared. ``k`` acknowledges the selected open alert through the confirm dialog (the reason is
required); ``s`` silences the selected alert for a time (the dialog asks how long, as ``irq
alerts silence --for``). Details come from agents and backends: shown inert
(terminal_text.py)."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text
from textual.binding import Binding

from console.alert_model import Alert
from console.terminal_text import terminal_safe
from console.tui.inert_text import inert
from console.tui.messages import FleetChange
from console.tui.run_columns import name_led
from console.tui.screens import mutation_flows, named_flows
from console.tui.screens.list_screen import Column, ListScreen
from console.tui.state_display import GlyphSet, truncate_middle
from console.tui.widgets.alert_bar import about_label, detail_without_run
from console.tui.widgets.table_fit import column_width

STATE_STYLE = {"open": "bold red", "acknowledged": "yellow", "cleared": "dim"}
_ORDER = {"open": 0, "acknowledged": 1, "cleared": 2}


def ordered(alerts: list[Alert]) -> list[Alert]:
    """Open, acknowledged, cleared; newest first within each."""
    by_time = sorted(alerts, key=lambda a: a.raised_at, reverse=True)
    return sorted(by_time, key=lambda a: _ORDER.get(a.state, 3))


#: backends whose run ids the engine makes up (a Restate invocation id, a LangGraph thread's
#: UUID): such an id says nothing of what the run is
OPAQUE_RUN_IDS = frozenset({"restate", "langgraph"})


def about_cell(alert: Alert, name: str, width: int, g: GlyphSet) -> str:
    """ABOUT, ``width`` wide (0: not laid out yet): what the alert is about, led by the run's
    name as the fleet's RUN column is (the detail cell leaves the name out). Where both do
    not fit, the name for an id the engine made up (four ``inv_…`` rows told the operator
    nothing), else the id, which the person who started the run chose; cut in the middle."""
    about = about_label(alert)
    led = name_led(name, about, g.separator)
    if width <= 0 or len(led) <= width:
        return led
    shown = name if name and alert.backend in OPAQUE_RUN_IDS else about
    return truncate_middle(shown, width, g.ellipsis)


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


class AlertsScreen(ListScreen[Alert]):
    VIEW_NAME = "alerts"
    NAME, DETAIL_ID = "alerts", "alert-detail"
    COLUMNS = (Column("STATE", "state", 13), Column("KIND", "kind", 18),
               Column("ABOUT", "about", 22, share=(2, 8)),
               Column("DETAIL", "detail", 30, share=(4, 12)))
    EMPTY = "No alerts: nothing needs a person right now."

    BINDINGS = [Binding("k", "ack", "ack", id="alert_ack"),
                Binding("s", "silence", "silence", id="alert_silence")]

    def listed(self) -> list[Alert]:
        return ordered(list(self.irq.view.alerts.values()))

    def key_of(self, item: Alert) -> str:
        return item.id

    def haystack(self, item: Alert) -> str:
        return f"{item.id} {item.kind} {item.state} {item.subject} {item.detail}"

    def cells(self, item: Alert) -> tuple[str | Text, ...]:
        # ABOUT names the run: the detail cell starts where the run's name ends
        name, rest = detail_without_run(item)
        about = about_cell(item, name, column_width(self.table, "about"), self.irq.glyphs)
        return (state_cell(item, self.irq.clock()), inert(item.kind), inert(about),
                inert(rest))

    def headline(self, shown: list[Alert]) -> Text:
        active = [a for a in shown if a.state != "cleared"]
        return Text(f" Alerts: {sum(1 for a in active if a.state == 'open')} open, "
                    f"{sum(1 for a in active if a.state == 'acknowledged')} acknowledged",
                    style="bold")

    def detail(self, item: Alert) -> Text:
        return alert_detail(item, self.irq.clock())

    def find(self, key: str) -> Alert | None:
        return self.irq.view.alerts.get(key)

    def selected_alert(self) -> Alert | None:
        return self.selected_item()

    def open_selected(self) -> None:
        alert = self.selected_alert()
        if alert is not None and alert.run and alert.run in self.irq.view.runs:
            self.irq.open_run(alert.run)

    def fleet_changed(self, change: FleetChange) -> None:
        if change.alerts or change.runs is None:
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
        if alert is None or alert.state == "cleared":
            irq.notify("silence: no open or acknowledged alert selected", severity="warning")
            return
        if self.refused("silence"):
            return
        if irq.mutation_pending:
            return
        irq.run_mutation(named_flows.alert_silence_steps(irq, alert.id), "_alert_flow")

    def action_ack(self) -> None:
        irq = self.irq
        alert = self.selected_alert()
        if alert is None or alert.state != "open":
            irq.notify("acknowledge: no open alert selected", severity="warning")
            return
        if self.refused("acknowledge"):
            return
        if irq.mutation_pending:
            return
        irq.run_mutation(mutation_flows.alert_ack_steps(irq, alert.id), "_alert_flow")
