"""The console app: owns the fleet state, the live feed, navigation and the mutation flows.

Data flow (harlequin-style): a worker runs the :class:`FleetSource` (a live gateway session)
and only posts messages; the app accumulates them into one :class:`FleetChange` and applies
it to the visible screen from a timer, at most ``1/flush_interval`` times a second whatever
the event rate. A second timer (1 s) re-judges liveness and advances heartbeat ages.

Every mutation goes: dry run (the gateway's plan) -> :class:`ConfirmDialog` (targets, plan,
reason, default No) -> the real command -> :class:`ResultsDialog` (per-item outcome).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text
from textual import work
from textual.app import App
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.dom import DOMNode
from textual.filter import LineFilter
from textual.notifications import SeverityLevel
from textual.screen import Screen

from console.client import ConnectionStatus, FleetView, GatewayError
from console.config import ConfigError, Connection, load_config, resolve_connection
from console.gc_policy import GcPolicy
from console.model import (
    Action,
    AuditEntry,
    CommandResult,
    Decision,
    DecisionKind,
    Interrupt,
    Role,
    RunState,
    utcnow,
)
from console.notify_config import NotifySettings
from console.terminal_text import terminal_safe
from console.tui.attention import Attention
from console.tui.command_line import parse_command
from console.tui.fleet_source import FleetSource, LiveSource, RecordedSource
from console.tui.inert_text import InertControlCharacters
from console.tui.marks import clear_sent_marks
from console.tui.messages import FleetBatch, FleetChange, LagMeasured, StatusChanged
from console.tui.obligation_book import OPEN_STATES, due_text, overdue_count
from console.tui.palette import IrqCommands
from console.tui.run_rows import SORT_CYCLE, RunRowIndex
from console.tui.screens.audit import AuditScreen
from console.tui.screens.base import DECISIONS as DECISION_NAMES
from console.tui.screens.base import ViewScreen
from console.tui.screens.fleet import FleetScreen
from console.tui.screens.help import HelpScreen, KeyHelp
from console.tui.screens.inbox import InboxScreen, args_text, policy_text
from console.tui.screens.obligations import ObligationsScreen
from console.tui.screens.run_detail import RunDetailScreen
from console.tui.scrollbars import use_mode_scrollbars
from console.tui.state_display import glyphs
from console.tui.textual_internals import SpanWritingApp
from console.tui.widgets.confirm_dialog import ConfirmDialog
from console.tui.widgets.results_dialog import ResultsDialog
from console.tui.widgets.status_header import HeaderInfo
from console.tui.widgets.value_editors import (
    ArgsEditor,
    FeedbackEditor,
    ResponseEditor,
    ValueEditor,
)

STYLES = Path(__file__).parent / "styles"
TIMELINE_LENGTH = 30
THEMES = {"dark": "textual-dark", "light": "textual-light", "ansi": "ansi-dark",
          "ansi-light": "ansi-light"}


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class IrqApp(SpanWritingApp):
    """The irq console (its partial updates write only the dirty part of each line:
    ``span_update.py``, through ``textual_internals.py``)."""

    TITLE = "irq"
    CSS_PATH = [STYLES / "irq.tcss"]
    COMMANDS = App.COMMANDS | {IrqCommands}
    BINDINGS = [
        Binding("1", "view('fleet')", "fleet", show=False, id="view_fleet"),
        Binding("2", "view('inbox')", "inbox", show=False, id="view_inbox"),
        Binding("3", "view('audit')", "audit", show=False, id="view_audit"),
        Binding("o", "view('obligations')", "oblig", show=False, id="view_obligations"),
    ]

    def __init__(
        self,
        source: FleetSource,
        *,
        context: str = "",
        read_only: bool = False,
        keymap: dict[str, str] | None = None,
        ascii_only: bool = False,
        theme: str | None = None,
        clock: Callable[[], datetime] = utcnow,
        flush_interval: float = 0.1,
        tick_interval: float = 1.0,
        ping_interval: float = 5.0,
        notify: NotifySettings | None = None,
    ) -> None:
        super().__init__()
        self.source = source
        self.context = context
        self.read_only = read_only
        self.keymap = dict(keymap or {})
        self.ascii_only = ascii_only
        self.glyphs = glyphs(ascii_only)
        use_mode_scrollbars()  # block-free scrollbars while this app is ASCII-only
        self.clock = clock
        self.flush_interval = flush_interval
        self.tick_interval = tick_interval
        self.ping_interval = ping_interval
        self.index = RunRowIndex()
        self.status = ConnectionStatus("connecting")
        self.lag_s: float | None = None
        self.audit: list[AuditEntry] = []
        self.timeline: dict[str, list[tuple[datetime, RunState]]] = {}
        self._pending = FleetChange(runs=None)
        self._has_data = False
        self.redraws = 0  # batches applied to the screen (for the benchmark)
        self.mutation_pending = False  # a plan/confirm/result flow is open
        self.animation_level = "none"  # over SSH: nothing moves that need not
        self._inert_text = InertControlCharacters()
        self.attention = Attention(self, notify)  # bell / desktop ([notify]), OSC 52 copy
        self.gc_policy = GcPolicy()  # full collections off the key path (gc_policy.py)
        self._help_screens: dict[tuple[Any, ...], str] = {}  # installed help, by content
        self._help_serial = itertools.count(1)
        wanted = THEMES.get(theme or "", theme or "textual-dark")
        self.theme = wanted if wanted in self.available_themes else "textual-dark"

    # --------------------------------------------------------------- lifecycle

    @property
    def view(self) -> FleetView:
        return self.source.view

    def get_line_filters(self) -> list[LineFilter]:
        """Textual's filters, then the one that keeps escape sequences in foreign text inert
        on every line written (widgets make text inert themselves; this catches the rest)."""
        return [*super().get_line_filters(), self._inert_text]

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Notifications quote gateway errors, ids and agent text: shown as plain text (a
        ``[/x]`` in an id must not raise a markup error), control characters visible."""
        super().notify(terminal_safe(message, multiline=True), title=terminal_safe(title),
                       severity=severity, timeout=timeout, markup=False)

    def get_default_screen(self) -> Screen[Any]:
        return FleetScreen()

    def on_mount(self) -> None:
        if self.keymap:
            self.set_keymap(self.keymap)
        self.set_interval(self.flush_interval, self._apply_pending, name="flush")
        self.set_interval(self.tick_interval, self._tick, name="tick")
        if not self.is_headless:  # a terminal's app, not a test's (tests share the process)
            self.gc_policy.start()
        self._start_feed()

    def _start_feed(self) -> None:
        self._feed()
        if self.ping_interval > 0 and isinstance(self.source, LiveSource):
            self._pinger()

    @work(exclusive=True, group="feed")
    async def _feed(self) -> None:
        source = self.source
        await source.run(self._feed_update, self._feed_status)

    @work(exclusive=True, group="ping")
    async def _pinger(self) -> None:
        source = self.source
        while source is self.source:
            await asyncio.sleep(self.ping_interval)
            self.post_message(LagMeasured(await source.ping()))

    def _feed_update(self, view: FleetView, events: list[dict[str, Any]]) -> None:
        self.post_message(FleetBatch(events))

    def _feed_status(self, status: ConnectionStatus) -> None:
        self.post_message(StatusChanged(status))

    async def on_unmount(self) -> None:
        self.source.stop()
        self.gc_policy.stop()

    # ------------------------------------------------------------ live updates

    def on_fleet_batch(self, message: FleetBatch) -> None:
        self._pending.add(message.events)
        self.attention.observe(message.events, self.view)

    def on_status_changed(self, message: StatusChanged) -> None:
        old = self.status.state
        self.status = message.status
        if message.status.state == "unauthorized" and old != "unauthorized":
            self.notify(message.status.detail or "the gateway refused the token",
                        title="Unauthorized", severity="error", timeout=30)
        self._refresh_headers()
        if self.screen_stack:  # a status can arrive before the first screen or after the last
            self.refresh_bindings()

    def on_lag_measured(self, message: LagMeasured) -> None:
        self.lag_s = message.seconds

    def _apply_pending(self) -> None:
        change = self._pending
        if change.empty:
            return
        self._pending = FleetChange()
        now = self.clock()
        snapshot = change.runs is None
        change.reordered = self.index.sync(self.view, now, change.runs)
        self._has_data = True
        self._record_transitions(now)
        if change.audit:
            self.merge_audit(change.audit)
        self.redraws += 1
        self._apply(change)
        if snapshot:  # a whole fleet arrived: the one full collection, now, not minutes later
            self.gc_policy.rebase()

    def _tick(self) -> None:
        self.gc_policy.tick()
        self.attention.tick()
        now = self.clock()
        if self.index.retime(now):
            self._record_transitions(now)
            self._apply(FleetChange(runs=set(), reordered=True))
        screen = self.view_screen
        if screen is not None:
            try:
                screen.tick()
            except NoMatches:
                pass

    def _apply(self, change: FleetChange) -> None:
        screen = self.view_screen
        if screen is not None:
            try:
                screen.fleet_changed(change)
                screen.refresh_header()
            except NoMatches:  # the screen is being torn down (quit, :ctx)
                pass

    def _record_transitions(self, now: datetime) -> None:
        for run_id, state in self.index.drain_transitions():
            line = self.timeline.setdefault(run_id, [])
            line.append((now, state))
            del line[:-TIMELINE_LENGTH]

    def _refresh_headers(self) -> None:
        screen = self.view_screen
        if screen is not None:
            screen.refresh_header()

    @property
    def view_screen(self) -> ViewScreen | None:
        """The topmost view (under any dialog)."""
        for screen in reversed(self.screen_stack):
            if isinstance(screen, ViewScreen):
                return screen if screen.ready else None
        return None

    def merge_audit(self, entries: list[AuditEntry]) -> None:
        seen = {(e.command_id, e.target, e.at) for e in self.audit}
        merged = self.audit + [e for e in entries
                               if (e.command_id, e.target, e.at) not in seen]
        merged.sort(key=lambda e: e.at)
        self.audit = merged[-1000:]

    def oldest_pending_interrupt(self, run_id: str) -> Interrupt | None:
        run = self.view.runs.get(run_id)
        ids = set(run.interrupts) if run else set()
        pending = [i for i in self.view.interrupts.values()
                   if i.status == "pending" and (i.run_id == run_id or i.id in ids)]
        return min(pending, key=lambda i: i.created_at) if pending else None

    # --------------------------------------------------------------- header

    def header_info(self, view_name: str) -> HeaderInfo:
        now = self.clock()
        unreachable = [
            (key, (now - b.last_ok_at).total_seconds() if b.last_ok_at else None)
            for key, b in sorted(self.view.backends.items()) if not b.reachable
        ]
        detail = self.status.detail
        if self.status.state == "connecting" and not detail:
            detail = f"to {self.source.url}"
        return HeaderInfo(
            context=self.context,
            url=self.source.url,
            connection=self.status.state,
            detail=detail,
            attempts=self.status.attempts,
            lag_ms=self.lag_s * 1000 if self.lag_s is not None else None,
            identity=self.source.identity,
            role=self.source.role,
            read_only=self.read_only,
            unreachable=unreachable,
            runs=len(self.view.runs),
            pending=sum(1 for i in self.view.interrupts.values() if i.status == "pending"),
            view=view_name,
            overdue=overdue_count(self.view.obligations.values(), now),
        )

    # -------------------------------------------------------------- navigation

    def action_view(self, name: str) -> None:
        self.show_view(name)

    def show_view(self, name: str) -> None:
        current = self.view_screen
        if name == "fleet":
            while len(self.screen_stack) > 1:
                self.pop_screen()
            return
        wanted: type[ViewScreen] = {"inbox": InboxScreen, "audit": AuditScreen,
                                    "obligations": ObligationsScreen}[name]
        if isinstance(current, wanted) and current is self.screen:
            return
        while len(self.screen_stack) > 1:
            self.pop_screen()
        self.push_screen(wanted())

    def open_run(self, run_id: str) -> None:
        current = self.screen
        if isinstance(current, RunDetailScreen) and current.run_id == run_id:
            return
        self.push_screen(RunDetailScreen(run_id))

    def go_back(self) -> None:
        if len(self.screen_stack) > 1:
            self.pop_screen()

    def filter_fleet(self, text: str) -> None:
        self.show_view("fleet")
        self.call_after_refresh(self._filter_fleet, text)

    def _filter_fleet(self, text: str) -> None:
        screen = self.view_screen
        if isinstance(screen, FleetScreen):
            screen.apply_filter(text)

    # -------------------------------------------------------------------- help

    def show_help(self, screen: ViewScreen) -> None:
        rows: list[KeyHelp] = []
        seen: set[str] = set()
        nodes: list[DOMNode] = [screen]
        if screen.focused is not None:
            nodes.append(screen.focused)
        nodes.append(self)
        for node in nodes:
            for binding in _class_bindings(node):
                bid = binding.id or binding.action
                if bid in seen or binding.system:
                    continue
                seen.add(bid)
                keys = self.keymap.get(binding.id or "", binding.key)
                display = " ".join(self._key_display(k) for k in keys.split(","))
                status = ""
                state = screen.check_action(binding.action.split("(")[0], ())
                if state is None:
                    status = self._not_allowed_reason(binding.action, screen)
                elif state is False:
                    status = "nothing selected"
                rows.append(KeyHelp(display, binding.description, bid, status))
        rows.append(KeyHelp(self._key_display("ctrl+p"), "command palette", "command_palette",
                            ""))
        rows.append(KeyHelp(self._key_display("ctrl+q"), "quit", "quit", ""))
        title = screen.VIEW_NAME or "irq"
        key = (title, tuple(rows), self.ascii_only, self.theme)
        name = self._help_screens.get(key)
        if name is None:
            # kept installed: reopening the same help (same keys, same statuses) skips the
            # compose, mount and style pass and Textual's per-line caches stay warm
            if len(self._help_screens) >= 8:
                for old_key, old_name in list(self._help_screens.items()):
                    if not any(s is self.get_screen(old_name) for s in self.screen_stack):
                        del self._help_screens[old_key]
                        self.uninstall_screen(old_name)
            name = f"irq-help-{next(self._help_serial)}"
            self.install_screen(HelpScreen(title, rows, self.ascii_only), name)
            self._help_screens[key] = name
        self.push_screen(name)

    def get_key_display(self, binding: Binding) -> str:
        """Textual's key names (``↑``, ``⏎``, ``⌫``...), or the key's own name in ASCII mode."""
        shown = super().get_key_display(binding)
        if self.ascii_only and not shown.isascii():
            return binding.key
        return shown

    def _key_display(self, key: str) -> str:
        return self.get_key_display(Binding(key.strip(), ""))

    def _not_allowed_reason(self, action: str, screen: ViewScreen) -> str:
        allowed, why = self.may_mutate()
        intr = screen.selected_interrupt()
        short = self.decide_role_missing(intr) if intr is not None else ""
        if allowed and short and action.split("(")[0] in DECISION_NAMES:
            return f"not allowed: {short}"
        return "nothing selected" if allowed else f"not allowed: {why}"

    # ------------------------------------------------------------- permissions

    def may_mutate(self) -> tuple[bool, str]:
        if self.read_only:
            return False, f"context {self.context or 'this'} is read-only"
        role = self.source.role
        if role == "viewer":
            return False, "your role is viewer"
        return True, ""

    def decide_role_missing(self, intr: Interrupt) -> str:
        """Why this operator's role cannot decide ``intr`` under its policy rule ("" if it
        can; the gateway checks it again). An unknown role reads as admin, as it does there."""
        if intr.policy is None:
            return ""
        try:
            needed = Role(intr.policy.decide_role)
        except ValueError:
            needed = Role.ADMIN
        try:
            mine = Role(self.source.role)
        except ValueError:
            return ""  # not told our role yet: leave it to the gateway
        if mine.at_least(needed):
            return ""
        return f"rule {intr.policy.rule} needs {needed.value} (you are {mine.value})"

    # ---------------------------------------------------------------- mutations

    def request_action(self, action: Action, targets: list[str]) -> None:
        allowed, why = self.may_mutate()
        if not allowed:
            self.notify(f"{action.value}: {why}", title="Not allowed", severity="error")
            return
        if not targets:
            self.notify(f"{action.value}: no run selected", severity="warning")
            return
        if self.mutation_pending:
            return
        self.mutation_pending = True
        self.refresh_bindings()
        self._action_flow(action, list(targets))

    def request_decision(self, kind: DecisionKind, interrupt_id: str) -> None:
        allowed, why = self.may_mutate()
        if not allowed:
            self.notify(f"{kind.value}: {why}", title="Not allowed", severity="error")
            return
        intr = self.view.interrupts.get(interrupt_id)
        if intr is None or intr.status != "pending":
            self.notify(f"{interrupt_id} is not pending", severity="warning")
            return
        if kind not in intr.allowed_decisions:
            allowed_list = ", ".join(d.value for d in intr.allowed_decisions)
            self.notify(f"this interrupt allows only: {allowed_list}", severity="warning")
            return
        short = self.decide_role_missing(intr)
        if short:
            self.notify(f"{kind.value}: {short}", title="Not allowed", severity="error")
            return
        if self.mutation_pending:
            return
        self.mutation_pending = True
        self.refresh_bindings()
        self._decision_flow(kind, interrupt_id)

    def _mutation_done(self) -> None:
        self.mutation_pending = False
        self.refresh_bindings()

    @work(group="mutation")
    async def _action_flow(self, action: Action, targets: list[str]) -> None:
        try:
            await self._action_steps(action, targets)
        finally:
            self._mutation_done()

    async def _action_steps(self, action: Action, targets: list[str]) -> None:
        try:
            dry = await self.source.command(action, targets, dry_run=True)
        except GatewayError as exc:
            self.notify(exc.message, title=f"No plan for {action.value}", severity="error")
            return
        plan = next((r.plan for r in dry if r.plan is not None), None)
        problems = [r for r in dry if r.outcome not in ("applied", "planned")]
        details: RenderableType | None = None
        if problems:
            text = Text()
            for r in problems:
                text.append(terminal_safe(f"{self.glyphs.stale} {r.target}: {r.outcome}"),
                            style="bold red")
                text.append(f" {terminal_safe(r.detail or r.error or '')}\n", style="red")
            text.rstrip()
            details = text
        count = f"{len(targets)} run" + ("s" if len(targets) != 1 else "")
        dialog = ConfirmDialog(
            title=f"{action.value.capitalize()} {count}?",
            verb=action.value,
            targets=targets,
            plan=plan,
            details=details,
            danger=action in (Action.CANCEL, Action.TERMINATE),
            glyphs=self.glyphs,
            ascii_only=self.ascii_only,
        )
        outcome = await self.push_screen_wait(dialog)
        if outcome is None:
            self.notify(f"{action.value}: nothing sent", timeout=3)
            return
        results = await self._send(action, targets, reason=outcome.reason)
        clear_sent_marks(self.view_screen, results)  # applied: unmarked; failed: kept
        await self.push_screen_wait(ResultsDialog(action.value.capitalize(), results,
                                                  self.glyphs, self.ascii_only))

    @work(group="mutation")
    async def _decision_flow(self, kind: DecisionKind, interrupt_id: str) -> None:
        try:
            await self._decision_steps(kind, interrupt_id)
        finally:
            self._mutation_done()

    async def _decision_steps(self, kind: DecisionKind, interrupt_id: str) -> None:
        intr = self.view.interrupts[interrupt_id]
        editor: ValueEditor | None = None
        if kind is DecisionKind.EDIT:
            editor = ArgsEditor(intr.args, intr.args_schema, id="args-editor")
        elif kind is DecisionKind.REJECT:
            editor = FeedbackEditor(id="feedback-editor")
        elif kind is DecisionKind.RESPOND:
            editor = ResponseEditor(id="response-editor")
        head = Text()
        head.append(f"{terminal_safe(intr.title)}\n", style="bold")
        head.append(f"run {terminal_safe(intr.run_id)}\n", style="dim")
        if intr.policy is not None:
            head.append(policy_text(intr.policy))
            head.append("\n")
        action = terminal_safe(intr.action or "")
        if kind is DecisionKind.APPROVE:
            head.append("runs as proposed: ", style="bold")
            head.append(action or "(no action)")
            details: RenderableType = Group(head, args_text(intr))
        elif kind is DecisionKind.REJECT:
            head.append(f"does not run {action or 'the proposed action'}; "
                        "your feedback goes back to the agent")
            details = head
        elif kind is DecisionKind.RESPOND:
            head.append("your answer becomes the result of "
                        f"{action or 'the tool call'}")
            details = head
        else:
            head.append(f"runs {action or 'the action'} with your arguments")
            details = head
        dialog = ConfirmDialog(
            title=f"{kind.value.capitalize()} interrupt?",
            verb=kind.value,
            targets=[interrupt_id],
            details=details,
            editor=editor,
            glyphs=self.glyphs,
            ascii_only=self.ascii_only,
        )
        outcome = await self.push_screen_wait(dialog)
        if outcome is None:
            self.notify(f"{kind.value}: nothing sent", timeout=3)
            return
        decision = Decision(kind=kind)
        if kind is DecisionKind.EDIT:
            decision.args = outcome.value
        elif kind is DecisionKind.REJECT:
            decision.feedback = outcome.value or ""
        elif kind is DecisionKind.RESPOND:
            decision.response = outcome.value
        results = await self._send(Action.DECIDE, [interrupt_id], reason=outcome.reason,
                                   decision=decision)
        await self.push_screen_wait(ResultsDialog(kind.value.capitalize(), results,
                                                  self.glyphs, self.ascii_only))

    def request_obligation(self, verb: str, obligation_id: str) -> None:
        """Fulfil or waive an open obligation: confirm dialog (the reason is the note, and
        required), then the gateway's ``obligation_fulfil`` / ``obligation_waive``."""
        allowed, why = self.may_mutate()
        if not allowed:
            self.notify(f"{verb}: {why}", title="Not allowed", severity="error")
            return
        ob = self.view.obligations.get(obligation_id)
        if ob is None or ob.state not in OPEN_STATES:
            self.notify(f"{obligation_id} is not open", severity="warning")
            return
        if self.mutation_pending:
            return
        self.mutation_pending = True
        self.refresh_bindings()
        self._obligation_flow(verb, obligation_id)

    @work(group="mutation")
    async def _obligation_flow(self, verb: str, obligation_id: str) -> None:
        try:
            await self._obligation_steps(verb, obligation_id)
        finally:
            self._mutation_done()

    async def _obligation_steps(self, verb: str, obligation_id: str) -> None:
        ob = self.view.obligations[obligation_id]
        now = self.clock()
        head = Text()
        head.append(f"{terminal_safe(ob.what or '(no description)')}\n", style="bold")
        head.append(terminal_safe(f"rule {ob.rule}, run {ob.run_id}"), style="dim")
        due = due_text(ob, now, "")
        if due:
            head.append(f"\n{due}", style="bold red" if due.startswith("overdue") else "")
        head.append("\nthe reason is recorded as the obligation's note (required)")
        dialog = ConfirmDialog(
            title=f"{verb.capitalize()} obligation?",
            verb=verb,
            targets=[obligation_id],
            details=head,
            glyphs=self.glyphs,
            ascii_only=self.ascii_only,
        )
        outcome = await self.push_screen_wait(dialog)
        if outcome is None:
            self.notify(f"{verb}: nothing sent", timeout=3)
            return
        if not outcome.reason:
            self.notify(f"{verb}: a note is required (type it as the reason); nothing sent",
                        severity="error")
            return
        name = f"obligation_{verb}"
        try:
            results = await self.source.named_command(name, [obligation_id],
                                                      reason=outcome.reason)
        except GatewayError as exc:
            unknown = f" {self.glyphs.dash} it may or may not have been applied: check :audit"
            results = [CommandResult(id="", action=name, target=obligation_id,
                                     outcome="failed", error=exc.code,
                                     detail=exc.message + (unknown if exc.code == "unreachable"
                                                           else ""))]
        if not results:
            results = [CommandResult(id="", action=name, target=obligation_id,
                                     outcome="failed",
                                     detail="the gateway answered with no result")]
        await self.push_screen_wait(ResultsDialog(verb.capitalize(), results, self.glyphs,
                                                  self.ascii_only))

    async def _send(self, action: Action, targets: list[str], *, reason: str,
                    decision: Decision | None = None) -> list[CommandResult]:
        try:
            results = await self.source.command(action, targets, reason=reason,
                                                decision=decision)
        except GatewayError as exc:
            unknown = f" {self.glyphs.dash} it may or may not have been applied: check :audit"
            return [CommandResult(id="", action=action.value, target=t, outcome="failed",
                                  detail=exc.message + (unknown if exc.code == "unreachable"
                                                        else ""), error=exc.code)
                    for t in targets]
        if not results:
            return [CommandResult(id="", action=action.value, target=t, outcome="failed",
                                  detail="the gateway answered with no result")
                    for t in targets]
        return results

    # ----------------------------------------------------------- : commands

    def execute_command(self, line: str, screen: ViewScreen) -> None:
        cmd = parse_command(line)
        if cmd.error:
            self.notify(cmd.error, title=":" + line.strip(), severity="error")
            return
        name = cmd.name
        if name in ("runs", "inbox", "audit", "obligations"):
            self.show_view("fleet" if name == "runs" else name)
            if name == "runs" and cmd.args:
                self.call_after_refresh(self._filter_fleet, cmd.rest)
        elif name == "run":
            run_id = self.resolve_run(cmd.args[0])
            if run_id:
                self.open_run(run_id)
        elif name in ("pause", "resume", "cancel", "terminate"):
            targets = [self.resolve_run(a) for a in cmd.args] if cmd.args \
                else screen.selected_run_ids()
            if all(targets) and targets:
                self.request_action(Action(name), [t for t in targets if t])
            elif not targets:
                self.notify(f":{name}: no run selected (:{name} RUN)", severity="error")
        elif name in ("approve", "edit", "reject", "respond"):
            intr_id: str | None
            if cmd.args:
                intr_id = self.resolve_interrupt(cmd.args[0])
            else:
                selected = screen.selected_interrupt()
                intr_id = selected.id if selected else None
                if intr_id is None:
                    self.notify(f":{name}: no interrupt selected (:{name} INTERRUPT)",
                                severity="error")
            if intr_id:
                self.request_decision(DecisionKind(name), intr_id)
        elif name == "filter":
            screen.apply_filter(cmd.rest)
        elif name == "sort":
            self._sort(cmd.args)
        elif name == "ctx":
            self.switch_context(cmd.args[0])
        elif name == "help":
            self.show_help(screen)
        elif name == "quit":
            self.exit()

    def _sort(self, args: tuple[str, ...]) -> None:
        keys = [k.value for k in SORT_CYCLE]
        if not args or args[0] not in keys:
            self.notify(f":sort KEY [desc] {self.glyphs.dash} KEY one of {', '.join(keys)}",
                        severity="error")
            return
        self.show_view("fleet")
        reverse = len(args) > 1 and args[1].lower() in ("desc", "reverse", "-")

        def apply() -> None:
            screen = self.view_screen
            if isinstance(screen, FleetScreen):
                screen.sort_by(args[0], reverse)

        self.call_after_refresh(apply)

    def resolve_run(self, token: str) -> str | None:
        """A run id from a full id, a native id, or a unique prefix (``console.ids``: the
        rule every mutation uses; never a suffix or a substring)."""
        from console.ids import match_id, run_candidates

        found = match_id(token, run_candidates(self.view.runs.values()))
        if len(found) == 1:
            return found[0]
        if not found:
            self.notify(f"no run matches {token!r}", severity="error")
        else:
            self.notify(f"{token!r} matches {len(found)} runs; give more of the id",
                        severity="error")
        return None

    def resolve_interrupt(self, token: str) -> str | None:
        from console.ids import interrupt_candidates, match_id

        found = match_id(token, interrupt_candidates(self.view.interrupts.values()))
        if len(found) == 1:
            return found[0]
        self.notify(f"no single interrupt matches {token!r}", severity="error")
        return None

    def switch_context(self, name: str) -> None:
        try:
            conn = resolve_connection(context=name)
        except ConfigError as exc:
            self.notify(str(exc), title=":ctx", severity="error")
            return
        self.source.stop()
        self.workers.cancel_group(self, "feed")
        self.workers.cancel_group(self, "ping")
        self.source = LiveSource(conn.url, conn.token)
        self.context = conn.context
        self.read_only = conn.read_only
        self.index = RunRowIndex()
        self.audit = []
        self.timeline = {}
        self.status = ConnectionStatus("connecting")
        self._pending = FleetChange(runs=None)
        while len(self.screen_stack) > 1:
            self.pop_screen()
        fleet = self.view_screen
        if isinstance(fleet, FleetScreen):
            fleet.table.index = self.index
        self._start_feed()
        self.notify(f"switched to context {conn.context} ({conn.url})", timeout=4)


def _class_bindings(node: DOMNode) -> list[Binding]:
    out: list[Binding] = []
    for cls in type(node).__mro__:
        if cls.__module__.startswith("textual"):
            continue  # Textual's own scrolling keys: not ours to document
        for item in cls.__dict__.get("BINDINGS", []):
            if isinstance(item, Binding):
                out.append(item)
    return out


def build_app(connection: Connection, *, ascii_only: bool | None = None,
              theme: str | None = None) -> IrqApp:
    """The app for ``connection``: keys from the config file, flags from the environment."""
    notify: NotifySettings | None = None
    try:
        config = load_config()
        keymap, notify = config.keys, config.notify
    except ConfigError:
        keymap = {}
    if ascii_only is None:
        ascii_only = env_flag("IRQ_ASCII")
    theme = theme or os.environ.get("IRQ_THEME") or None
    recorded = os.environ.get("IRQ_TUI_RECORDED")
    source: FleetSource
    if recorded:
        source = RecordedSource(json.loads(Path(recorded).read_text()), url=recorded)
    else:
        source = LiveSource(connection.url, connection.token)
    return IrqApp(source, context=connection.context, read_only=connection.read_only,
                  keymap=keymap, ascii_only=ascii_only, theme=theme, notify=notify)


def run_tui(connection: Connection, mouse: bool = False, *, ascii_only: bool | None = None,
            theme: str | None = None) -> None:
    """Open the console on ``connection`` (blocks until the operator quits).

    Mouse is off by default (SSH); ``ascii_only`` defaults to ``IRQ_ASCII``; ``theme`` to
    ``IRQ_THEME`` (dark, light, ansi — ansi keeps the terminal's own palette).
    """
    app = build_app(connection, ascii_only=ascii_only, theme=theme)
    app.run(mouse=mouse)
