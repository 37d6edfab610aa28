"""What every view screen shares: the status header, the command bar, the footer, the
common keys (``/`` ``:`` ``?`` ``esc``) and the action keys with their permission checks, and
the run actions and decisions on the screen's selection (their steps: ``mutation_flows.py``).

A viewer (or a read-only context) sees mutating keys dimmed in the footer and cannot
trigger them; decision keys appear only when an interrupt is selected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, TextArea

from console.client import FleetView
from console.model import Action, DecisionKind, Interrupt
from console.tui.messages import FleetChange
from console.tui.screens import mutation_flows
from console.tui.screens.commands import run_command
from console.tui.widgets.alert_bar import AlertBar, needing_attention
from console.tui.widgets.command_bar import CommandBar
from console.tui.widgets.job_bar import JobBar
from console.tui.widgets.status_header import StatusHeader

if TYPE_CHECKING:
    from console.tui.app import IrqApp

RUN_ACTIONS: dict[str, Action] = {
    "pause": Action.PAUSE,
    "resume": Action.RESUME,
    "cancel": Action.CANCEL,
    "terminate": Action.TERMINATE,
    "retry": Action.RETRY,
}
DECISIONS: dict[str, DecisionKind] = {
    "approve": DecisionKind.APPROVE,
    "edit": DecisionKind.EDIT,
    "reject": DecisionKind.REJECT,
    "respond": DecisionKind.RESPOND,
}
MUTATING = frozenset(RUN_ACTIONS) | frozenset(DECISIONS) | {"release"}

# "/" and ":" are priority bindings: they run when the key is read, before the keys typed
# right after them (same SSH packet) are routed, so those land in the command bar.
COMMON_BINDINGS: list[BindingType] = [
    Binding("question_mark", "help", "help", id="help"),
    Binding("slash", "filter", "filter", id="filter", priority=True),
    Binding("colon", "command", "cmd", id="command", priority=True),
    Binding("escape", "back", "back", show=False, id="back"),
]
RUN_BINDINGS = [
    Binding("p", "pause", "pause", id="pause"),
    Binding("r", "resume", "resume", id="resume"),
    Binding("c", "cancel", "cancel", id="cancel"),
    Binding("x", "terminate", "kill", id="terminate"),
    Binding("R", "retry", "retry", id="retry"),
]
DECISION_BINDINGS = [
    Binding("a", "approve", "approve", id="approve"),
    Binding("e", "edit", "edit", id="edit"),
    Binding("n", "reject", "reject", id="reject"),
    Binding("t", "respond", "respond", id="respond"),
]


def selected_row_key(table: DataTable[Any]) -> str | None:
    """The key of the row under ``table``'s cursor (None when empty or mid-rebuild)."""
    if not table.row_count:
        return None
    try:
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
    except Exception:  # noqa: BLE001 - cursor outside rows while rebuilding
        return None
    return key


def oldest_pending_interrupt(view: FleetView, run_id: str) -> Interrupt | None:
    """The interrupt of ``run_id`` waiting longest for a decision (what ``a`` decides)."""
    run = view.runs.get(run_id)
    ids = set(run.interrupts) if run else set()
    pending = [i for i in view.interrupts.values()
               if i.status == "pending" and (i.run_id == run_id or i.id in ids)]
    return min(pending, key=lambda i: i.created_at) if pending else None


class ViewScreen(Screen[None]):
    """Base of fleet, inbox, run detail and audit."""

    VIEW_NAME = ""
    BINDINGS = COMMON_BINDINGS
    ready = False  # composed and mounted: safe to push changes into
    _kept_chrome: tuple[list[StatusHeader], list[AlertBar], list[JobBar]] | None = None

    @property
    def irq(self) -> IrqApp:
        return cast("IrqApp", self.app)

    # ----------------------------------------------------------------- chrome

    def compose_top(self) -> ComposeResult:
        yield StatusHeader(self.irq.glyphs, id="status")
        yield AlertBar(self.irq.glyphs, id="alert-bar")
        yield JobBar(self.irq.glyphs, id="job-bar")

    def compose_bottom(self) -> ComposeResult:
        yield CommandBar(id="bar")
        yield Footer(compact=True, show_command_palette=not self.irq.ascii_only)

    def on_mount(self) -> None:
        self.ready = True
        self.set_class(self.irq.ascii_only, "-ascii")
        self.refresh_header()

    def on_unmount(self) -> None:
        self.ready = False

    def on_screen_resume(self) -> None:
        self.fleet_changed(FleetChange(runs=None, interrupts=True, backends=True,
                                       reordered=True))
        self.refresh_header()
        self.refresh_bindings()

    def refresh_header(self) -> None:
        headers, bars, job_bars = self._chrome()
        for header in headers:
            header.show(self.irq.header_info(self.VIEW_NAME))
        for bar in bars:
            bar.show(needing_attention(self.irq.view.alerts.values(), self.irq.clock()))
        for job_bar in job_bars:
            job_bar.show(self.irq.job_watch.running)

    def _chrome(self) -> tuple[list[StatusHeader], list[AlertBar], list[JobBar]]:
        """The header, alert bar and job line, found once: three queries over every widget
        (the footer's keys included) at each flush and tick were a fifth of a flush."""
        kept = self._kept_chrome
        if kept is not None and all(w.is_attached for part in kept for w in part):
            return kept
        found = (list(self.query(StatusHeader)), list(self.query(AlertBar)),
                 list(self.query(JobBar)))
        self._kept_chrome = found if any(found) else None
        return found

    # ---------------------------------------------------- hooks for subclasses

    def fleet_changed(self, change: FleetChange) -> None:
        """Apply one coalesced batch of changes (called at most ~10 times a second)."""

    def tick(self) -> None:
        """Once a second: ages move on."""
        self.refresh_header()

    def selected_run_ids(self) -> list[str]:
        return []

    def selected_interrupt(self) -> Interrupt | None:
        return None

    def current_filter(self) -> str:
        return ""

    def apply_filter(self, text: str) -> None:
        """Filter this screen's list."""

    def focus_main(self) -> None:
        """Give focus back to the screen's main widget."""

    # ------------------------------------------------------------- permissions

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("filter", "command"):
            return not isinstance(self.focused, Input | TextArea)  # let them type / and :
        if action in MUTATING and self.irq.mutation_pending:
            return False  # one confirmation at a time; keys typed meanwhile do nothing
        if action in DECISIONS:
            intr = self.selected_interrupt()
            if intr is None or DECISIONS[action] not in intr.allowed_decisions:
                return False
            if self.irq.decide_role_missing(intr):
                return None  # shown dimmed: the interrupt's rule needs a higher role
            return True if self.irq.may_mutate()[0] else None
        if action in RUN_ACTIONS or action == "release":
            if not self.selected_run_ids():
                return None
            return True if self.irq.may_mutate()[0] else None
        return True

    def not_allowed_reason(self, action: str) -> str:
        """Why ``action`` (a binding's action) cannot run now (for the help screen)."""
        allowed, why = self.irq.may_mutate()
        intr = self.selected_interrupt()
        short = self.irq.decide_role_missing(intr) if intr is not None else ""
        if allowed and short and action.split("(")[0] in DECISIONS:
            return f"not allowed: {short}"
        return "nothing selected" if allowed else f"not allowed: {why}"

    # -------------------------------------------------------------- mutations

    def refused(self, verb: str) -> bool:
        """Whether this console may not change anything now (a viewer token, a read-only
        context): said so, under ``verb``."""
        allowed, why = self.irq.may_mutate()
        if not allowed:
            self.irq.notify(f"{verb}: {why}", title="Not allowed", severity="error")
        return not allowed

    def request_action(self, action: Action, targets: list[str]) -> None:
        """Pause/resume/cancel/terminate ``targets`` (plan and confirmation first)."""
        irq = self.irq
        if self.refused(action.value):
            return
        if not targets:
            irq.notify(f"{action.value}: no run selected", severity="warning")
            return
        if irq.mutation_pending:
            return
        irq.run_mutation(mutation_flows.action_steps(irq, action, list(targets)),
                         "_action_flow")

    def request_decision(self, kind: DecisionKind, interrupt_id: str) -> None:
        """Decide one pending interrupt (confirmation, and the editor ``kind`` needs, first)."""
        irq = self.irq
        if self.refused(kind.value):
            return
        intr = irq.view.interrupts.get(interrupt_id)
        if intr is None or intr.status != "pending":
            irq.notify(f"{interrupt_id} is not pending", severity="warning")
            return
        if kind not in intr.allowed_decisions:
            allowed_list = ", ".join(d.value for d in intr.allowed_decisions)
            irq.notify(f"this interrupt allows only: {allowed_list}", severity="warning")
            return
        short = irq.decide_role_missing(intr)
        if short:
            irq.notify(f"{kind.value}: {short}", title="Not allowed", severity="error")
            return
        if irq.mutation_pending:
            return
        irq.run_mutation(mutation_flows.decision_steps(irq, kind, interrupt_id),
                         "_decision_flow")

    def request_release(self, run_id: str, resource_id: str) -> None:
        """Force ``resource_id`` of ``run_id`` free (plan and confirmation first)."""
        irq = self.irq
        if self.refused("release"):
            return
        if irq.mutation_pending:
            return
        irq.run_mutation(mutation_flows.release_steps(irq, run_id, resource_id),
                         "_release_flow")

    # ---------------------------------------------------------------- actions

    def _run_action(self, name: str) -> None:
        self.request_action(RUN_ACTIONS[name], self.selected_run_ids())

    def _decide(self, name: str) -> None:
        intr = self.selected_interrupt()
        if intr is not None:
            self.request_decision(DECISIONS[name], intr.id)

    def action_pause(self) -> None:
        self._run_action("pause")

    def action_resume(self) -> None:
        self._run_action("resume")

    def action_cancel(self) -> None:
        self._run_action("cancel")

    def action_terminate(self) -> None:
        self._run_action("terminate")

    def action_retry(self) -> None:
        """Retry one run (the first selected): its plan is per run (which steps it kept)."""
        self.request_action(Action.RETRY, self.selected_run_ids()[:1])

    def action_approve(self) -> None:
        self._decide("approve")

    def action_edit(self) -> None:
        self._decide("edit")

    def action_reject(self) -> None:
        self._decide("reject")

    def action_respond(self) -> None:
        self._decide("respond")

    def action_help(self) -> None:
        self.irq.show_help(self)

    def action_copy_id(self) -> None:  # ``y`` on fleet and inbox (console/tui/attention.py)
        self.irq.attention.copy_selected(self)

    def action_filter(self) -> None:
        self.query_one(CommandBar).open("filter", self.current_filter())

    def action_command(self) -> None:
        self.query_one(CommandBar).open("command")

    def action_back(self) -> None:
        bar = self.query_one(CommandBar)
        if bar.is_open:
            bar.action_close()
            return
        if self.current_filter():
            self.apply_filter("")
            return
        self.irq.go_back()

    @on(CommandBar.FilterChanged)
    def _filter_typed(self, event: CommandBar.FilterChanged) -> None:
        self.apply_filter(event.text)

    @on(CommandBar.Submitted)
    def _bar_submitted(self, event: CommandBar.Submitted) -> None:
        self.focus_main()
        if event.mode == "filter":
            self.apply_filter(event.text)
        elif event.text.strip():
            run_command(self, event.text)

    @on(CommandBar.Closed)
    def _bar_closed(self) -> None:
        self.focus_main()
