"""Obligations the policy attached to tool calls ("notify the CISO within 10 minutes"):
overdue first, then open (due soonest first), then recently closed. ``f`` fulfils and ``w``
waives the selected one through the confirm dialog; the reason typed there is the note.

``what`` and notes come from policy files and agents: shown inert (terminal_text.py).
"""

from __future__ import annotations

from datetime import datetime

from rich.text import Text
from textual.binding import Binding

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
from console.tui.screens.list_screen import Column, ListScreen

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


class ObligationsScreen(ListScreen[Obligation]):
    VIEW_NAME = "obligations"
    NAME, DETAIL_ID = "obligations", "obligation-detail"
    COLUMNS = (Column("STATE", "state", 9), Column("DUE", "due", 14),
               Column("WHAT", "what", 30, share=(4, 12)), Column("RUN", "run", 20, share=(2, 8)),
               Column("RULE", "rule", 16, share=(2, 8)), Column("BY", "by", 10, share=(1, 5)))
    EMPTY = "No obligations: nothing the policy asked for is outstanding."

    BINDINGS = [*OBLIGATION_BINDINGS]

    @property
    def obligations(self) -> dict[str, Obligation]:
        return self.irq.view.obligations

    # ----------------------------------------------------------------- data

    def listed(self) -> list[Obligation]:
        return ordered(self.obligations.values(), self.irq.clock())

    def key_of(self, item: Obligation) -> str:
        return item.id

    def haystack(self, item: Obligation) -> str:
        return (f"{item.id} {item.what} {item.rule} {item.run_id} {item.tool} {item.by} "
                f"{effective_state(item, self.irq.clock())}")

    def cells(self, item: Obligation) -> tuple[str | Text, ...]:
        now, none = self.irq.clock(), self.irq.glyphs.none
        return (state_cell(item, now), due_cell(item, now, none), inert(item.what),
                inert(short_run(item.run_id)), inert(item.rule),
                inert(item.by) if item.by else Text(none, style="dim"))

    def headline(self, shown: list[Obligation]) -> Text:
        now = self.irq.clock()
        obligations = self.obligations.values()
        overdue = overdue_count(obligations, now)
        title = Text(f" Obligations: {open_count(obligations)} open", style="bold")
        if overdue:
            title.append(f", {overdue} overdue", style="bold red")
        return title

    def headline_tail(self) -> Text | None:
        version = policy_version(self.irq.view.policy)
        return Text(terminal_safe(f"  policy {version}"), style="dim") if version else None

    def detail(self, item: Obligation) -> Text:
        return obligation_detail(item, self.irq.clock(), self.irq.glyphs.none)

    def find(self, key: str) -> Obligation | None:
        return self.obligations.get(key)

    def selected_obligation(self) -> Obligation | None:
        return self.selected_item()

    def open_selected(self) -> None:
        ob = self.selected_obligation()
        if ob is not None and ob.run_id in self.irq.view.runs:
            self.irq.open_run(ob.run_id)

    # -------------------------------------------------------------- updates

    def fleet_changed(self, change: FleetChange) -> None:
        if change.obligations or change.runs is None:
            self._rebuild()

    def tick(self) -> None:
        super().tick()
        items = self.items()
        if [o.id for o in items] != self._shown:
            self._rebuild()  # an open obligation's deadline passed: it moves up
            return
        now, none = self.irq.clock(), self.irq.glyphs.none
        for ob in items:
            if ob.state in OPEN_STATES:
                self.table.update_cell(ob.id, "state", state_cell(ob, now))
                self.table.update_cell(ob.id, "due", due_cell(ob, now, none))
        self.draw_title(items)
        self.show_detail()

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
        if self.refused(verb):
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
