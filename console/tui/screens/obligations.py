"""Obligations the policy attached to tool calls ("notify the CISO within 10 minutes"):
overdue first, then open (due soonest first), then recently closed. ``f`` fulfils and ``w``
waives the selected one through the confirm dialog; the reason typed there is the note.

``what`` and notes come from policy files and agents: shown inert (terminal_text.py).
"""

from __future__ import annotations

from datetime import datetime

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from console.policy.model import Obligation, ObligationState
from console.terminal_text import terminal_safe
from console.tui.inert_text import inert
from console.tui.messages import FleetChange
from console.tui.obligation_book import (
    OPEN_STATES,
    due_text,
    effective_state,
    open_count,
    ordered,
    overdue_count,
    policy_version,
)
from console.tui.screens import mutation_flows
from console.tui.screens.base import ViewScreen, selected_row_key
from console.tui.widgets.table_fit import fit_columns

OBLIGATION_VERBS = frozenset({"fulfil", "waive"})
STATE_STYLE: dict[ObligationState, str] = {
    "overdue": "bold red",
    "open": "yellow",
    "fulfilled": "green",
    "waived": "dim",
}
OBLIGATION_BINDINGS = [
    Binding("f", "fulfil", "fulfil", id="fulfil"),
    Binding("w", "waive", "waive", id="waive"),
]


def short_run(run_id: str) -> str:
    """The run id without its ``backend:context/`` prefix (the RUN column's room is small)."""
    return run_id.split("/", 1)[-1]


def state_cell(ob: Obligation, now: datetime) -> Text:
    state = effective_state(ob, now)
    return Text(state, style=STATE_STYLE[state])


def due_cell(ob: Obligation, now: datetime, none: str) -> Text:
    state = effective_state(ob, now)
    return Text(due_text(ob, now, none), style="bold red" if state == "overdue" else "")


def obligation_detail(ob: Obligation, now: datetime, none: str) -> Text:
    text = Text()
    text.append(inert(ob.what or "(no description)", "bold"))
    state = state_cell(ob, now)
    due = due_text(ob, now, "")
    if due:
        state.append(f"  {due}", style="bold red" if due.startswith("overdue") else "")
    rule = inert(ob.rule)
    if ob.tool:
        rule.append(" after ")
        rule.append(inert(ob.tool))
    times = Text(ob.created_at.isoformat(timespec="seconds"))
    if ob.due_at is not None:
        times.append(f", due {ob.due_at.isoformat(timespec='seconds')}")
    rows = [("state", state), ("run", inert(ob.run_id)), ("rule", rule), ("opened", times)]
    if ob.by:
        rows.append(("by", inert(ob.by)))
    if ob.note:
        rows.append(("note", inert(ob.note)))
    rows.append(("id", inert(ob.id, "dim")))
    for label, value in rows:
        text.append(f"\n{label:<8}", style="bold")
        text.append(value)
    return text


class ObligationsScreen(ViewScreen):
    VIEW_NAME = "obligations"

    BINDINGS = [*OBLIGATION_BINDINGS]

    def __init__(self) -> None:
        super().__init__()
        self._filter = ""
        self._shown: list[str] = []

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield Static("", id="obligations-title", classes="view-title")
        table: DataTable[str | Text] = DataTable(cursor_type="row", id="obligations-table",
                                                 zebra_stripes=False)
        yield table
        yield Static("", id="obligation-detail")
        yield from self.compose_bottom()

    @property
    def table(self) -> DataTable[str | Text]:
        return self.query_one("#obligations-table", DataTable)

    @property
    def obligations(self) -> dict[str, Obligation]:
        return self.irq.view.obligations

    def on_mount(self) -> None:
        super().on_mount()
        t = self.table
        t.add_column("STATE", key="state", width=9)
        t.add_column("DUE", key="due", width=14)
        t.add_column("WHAT", key="what", width=30)
        t.add_column("RUN", key="run", width=20)
        t.add_column("RULE", key="rule", width=16)
        t.add_column("BY", key="by", width=10)
        self._rebuild()
        t.focus()

    def on_resize(self) -> None:
        fit_columns(self.table, self.size.width, {"state": 9, "due": 14},
                    {"what": (4, 12), "run": (2, 8), "rule": (2, 8), "by": (1, 5)})

    def focus_main(self) -> None:
        self.table.focus()

    # ----------------------------------------------------------------- data

    def _items(self, now: datetime) -> list[Obligation]:
        items = ordered(self.obligations.values(), now)
        if self._filter:
            words = self._filter.lower().split()
            items = [o for o in items if all(
                w in f"{o.id} {o.what} {o.rule} {o.run_id} {o.tool} {o.by} "
                     f"{effective_state(o, now)}".lower() for w in words)]
        return items

    def _rebuild(self) -> None:
        table = self.table
        selected = selected_row_key(table)
        now = self.irq.clock()
        none = self.irq.glyphs.none
        items = self._items(now)
        table.clear()
        for ob in items:
            table.add_row(state_cell(ob, now), due_cell(ob, now, none), inert(ob.what),
                          inert(short_run(ob.run_id)), inert(ob.rule),
                          inert(ob.by) if ob.by else Text(none, style="dim"), key=ob.id)
        self._shown = [o.id for o in items]
        if selected in self._shown:
            table.move_cursor(row=self._shown.index(selected), animate=False)
        self._draw_title(now, len(items))
        self._show_detail()
        self.refresh_bindings()

    def _draw_title(self, now: datetime, shown: int) -> None:
        obligations = self.obligations.values()
        overdue = overdue_count(obligations, now)
        title = Text(f" Obligations: {open_count(obligations)} open", style="bold")
        if overdue:
            title.append(f", {overdue} overdue", style="bold red")
        if self._filter:
            title.append(terminal_safe(f"  /{self._filter} ({shown} shown)"))
        version = policy_version(self.irq.view.policy)
        if version:
            title.append(terminal_safe(f"  policy {version}"), style="dim")
        self.query_one("#obligations-title", Static).update(title)

    def selected_obligation(self) -> Obligation | None:
        key = selected_row_key(self.table)
        return self.obligations.get(key) if key is not None else None

    def selected_run_ids(self) -> list[str]:
        return []

    def _show_detail(self) -> None:
        detail = self.query_one("#obligation-detail", Static)
        ob = self.selected_obligation()
        if ob is None:
            detail.update(Text("No obligations: nothing the policy asked for is "
                               "outstanding.", style="dim"))
            return
        detail.update(obligation_detail(ob, self.irq.clock(), self.irq.glyphs.none))

    # -------------------------------------------------------------- updates

    def fleet_changed(self, change: FleetChange) -> None:
        if change.obligations or change.runs is None:
            self._rebuild()

    def tick(self) -> None:
        super().tick()
        now = self.irq.clock()
        if [o.id for o in self._items(now)] != self._shown:
            self._rebuild()  # an open obligation's deadline passed: it moves up
            return
        none = self.irq.glyphs.none
        for ob_id in self._shown:
            ob = self.obligations.get(ob_id)
            if ob is not None and ob.state in OPEN_STATES:
                self.table.update_cell(ob_id, "state", state_cell(ob, now))
                self.table.update_cell(ob_id, "due", due_cell(ob, now, none))
        self._draw_title(now, len(self._shown))
        self._show_detail()

    def current_filter(self) -> str:
        return self._filter

    def apply_filter(self, text: str) -> None:
        self._filter = text.strip()
        self._rebuild()

    # ------------------------------------------------------------- actions

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in OBLIGATION_VERBS:
            if self.irq.mutation_pending:
                return False
            ob = self.selected_obligation()
            if ob is None or ob.state not in OPEN_STATES:
                return None  # shown dimmed: nothing open selected
            return True if self.irq.may_mutate()[0] else None
        return super().check_action(action, parameters)

    def _settle(self, verb: str) -> None:
        ob = self.selected_obligation()
        if ob is None:
            self.notify(f"{verb}: no obligation selected", severity="warning")
            return
        self.request_obligation(verb, ob.id)

    def request_obligation(self, verb: str, obligation_id: str) -> None:
        """Fulfil or waive an open obligation (confirmation first; the reason is the note)."""
        irq = self.irq
        allowed, why = irq.may_mutate()
        if not allowed:
            irq.notify(f"{verb}: {why}", title="Not allowed", severity="error")
            return
        ob = self.obligations.get(obligation_id)
        if ob is None or ob.state not in OPEN_STATES:
            irq.notify(f"{obligation_id} is not open", severity="warning")
            return
        if irq.mutation_pending:
            return
        irq.run_mutation(mutation_flows.obligation_steps(irq, verb, obligation_id),
                         "_obligation_flow")

    def action_fulfil(self) -> None:
        self._settle("fulfil")

    def action_waive(self) -> None:
        self._settle("waive")

    @on(DataTable.RowHighlighted, "#obligations-table")
    def _highlighted(self) -> None:
        self._show_detail()
        self.refresh_bindings()

    @on(DataTable.RowSelected, "#obligations-table")
    def _selected(self) -> None:
        ob = self.selected_obligation()
        if ob is not None and ob.run_id in self.irq.view.runs:
            self.irq.open_run(ob.run_id)
