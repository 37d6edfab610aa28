"""The console app: owns the fleet state, the live feed and the connection, navigation,
the global keys, permissions, and the one mutation flow open at a time.

Data flow (harlequin-style): a worker runs the :class:`FleetSource` (a live gateway session)
and only posts messages; the app accumulates them into one :class:`FleetChange` and applies
it to the visible screen from a timer, at most ``1/flush_interval`` times a second whatever
the event rate. A second timer (1 s) re-judges liveness and advances heartbeat ages.

What acts on a selection belongs to the screen that shows it: run actions and decisions
(``screens/base.py``), obligations (``screens/obligations.py``), ``:`` commands
(``screens/commands.py``). Every mutation goes: dry run (the gateway's plan) ->
:class:`ConfirmDialog` (targets, plan, reason, default No) -> the real command ->
:class:`ResultsDialog` (per-item outcome) (``screens/mutation_flows.py``); the app runs it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections.abc import Callable, Coroutine, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from textual import events, work
from textual.actions import ActionParseResult
from textual.app import App
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.dom import DOMNode
from textual.filter import LineFilter
from textual.notifications import SeverityLevel
from textual.screen import Screen

from console.client import ConnectionStatus, FleetView
from console.config import ConfigError, Connection, load_config, resolve_connection
from console.gc_policy import GcPolicy
from console.model import (
    AuditEntry,
    Interrupt,
    Role,
    RunState,
    utcnow,
)
from console.notify_config import NotifySettings
from console.terminal_text import terminal_safe
from console.tui.attention import Attention
from console.tui.fleet_source import FleetSource, LiveSource, RecordedSource
from console.tui.inert_text import InertControlCharacters
from console.tui.job_board import JobProgress
from console.tui.job_watch import JOB_ACTIONS, JobWatch
from console.tui.key_priority import KeyFirst
from console.tui.messages import FleetBatch, FleetChange, LagMeasured, StatusChanged
from console.tui.obligation_book import overdue_count
from console.tui.palette import IrqCommands
from console.tui.run_rows import RunRowIndex
from console.tui.screens.alerts import AlertsScreen
from console.tui.screens.audit import AuditScreen
from console.tui.screens.base import ViewScreen
from console.tui.screens.fleet import FleetScreen
from console.tui.screens.help import HelpScreen, key_rows
from console.tui.screens.inbox import InboxScreen
from console.tui.screens.jobs import JobsScreen
from console.tui.screens.obligations import ObligationsScreen
from console.tui.screens.run_detail import RunDetailScreen
from console.tui.scrollbars import use_mode_scrollbars
from console.tui.state_display import glyphs
from console.tui.textual_internals import SpanWritingApp
from console.tui.widgets.status_header import HeaderInfo

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
        Binding("4", "view('alerts')", "alerts", show=False, id="view_alerts"),
        Binding("5", "view('jobs')", "jobs", show=False, id="view_jobs"),
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
        key_first: KeyFirst | None = None,
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
        self.key_first = key_first or KeyFirst()  # flushes and ticks wait while a key is answered
        self._tick_owed = False  # a tick put off for a key, run by the next free flush
        self.redraws = 0  # batches applied to the screen (for the benchmark)
        self.mutation_pending = False  # a plan/confirm/result flow is open
        self.animation_level = "none"  # over SSH: nothing moves that need not
        self._inert_text = InertControlCharacters()
        self.attention = Attention(self, notify)  # bell / desktop ([notify]), OSC 52 copy
        self.gc_policy = GcPolicy()  # full collections off the key path (gc_policy.py)
        self._help_screens: dict[tuple[Any, ...], str] = {}  # installed help, by content
        self._help_serial = itertools.count(1)
        self.job_watch = JobWatch(lambda: self.source, self._jobs_changed, self._job_finished)
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
        if isinstance(self.source, LiveSource):
            self._watch_jobs()

    @work(exclusive=True, group="jobs")
    async def _watch_jobs(self) -> None:
        await self.job_watch.run()

    def _jobs_changed(self) -> None:
        self._refresh_headers()
        screen = self.view_screen
        if isinstance(screen, JobsScreen):
            screen.jobs_changed()

    def _job_finished(self, job: JobProgress) -> None:
        self.notify(f"job {job.id} ({job.action}) {job.state}: {job.done} done, "
                    f"{job.failed} failed of {job.targets}", title="Job",
                    severity="warning" if job.failed else "information", timeout=8)

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
        if any(e.get("kind") == "audit" and (e.get("data") or {}).get("action") in JOB_ACTIONS
               for e in message.events):
            self.job_watch.poke()  # a job created or cancelled (here or from a shell)
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

    # ---------------------------------------------------------- keys first

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded:
            self.key_first.key_arrived()  # the redraw timers wait until it is answered
        await super().on_event(event)

    async def run_action(self, action: str | ActionParseResult,
                         default_namespace: DOMNode | None = None,
                         namespaces: Mapping[str, DOMNode] | None = None) -> bool:
        try:
            return await super().run_action(action, default_namespace, namespaces)
        finally:
            if self.key_first.holding:  # answered once the screen shows the action
                self.call_after_refresh(self.key_first.settled)

    def _apply_pending(self) -> None:
        if self._tick_owed and not self.key_first.holding:
            self._tick_owed = False
            self._tick_now()
        change = self._pending
        if change.empty:
            self.key_first.nothing_waiting()
            return
        if not self.key_first.may_flush():
            return  # a key is in flight: these changes go out with the next flush
        self._pending = FleetChange()
        snapshot = change.runs is None
        change.reordered = self.index.sync(self.view, self.liveness_clock(), change.runs)
        self._has_data = True
        self._record_transitions(self.clock())  # the timeline keeps real times
        if change.audit:
            self.merge_audit(change.audit)
        self.redraws += 1
        self._apply(change)
        if snapshot:  # a whole fleet arrived: the one full collection, now, not minutes later
            self.gc_policy.rebase()

    def _tick(self) -> None:
        if self.key_first.holding:  # ages can wait a flush interval; the key cannot
            self._tick_owed = True
            return
        self._tick_now()

    def _tick_now(self) -> None:
        self.gc_policy.tick()
        self.attention.tick()
        if self.index.retime(self.liveness_clock()):
            self._record_transitions(self.clock())
            self._apply(FleetChange(runs=set(), reordered=True))
        screen = self.view_screen
        if screen is not None:
            try:
                screen.tick()
            except NoMatches:
                pass

    def liveness_clock(self) -> datetime:
        """``clock()`` for judging runs' heartbeat ages: while the gateway sheds this
        console's beats, the time that began (FleetView.liveness_now)."""
        return self.view.liveness_now(self.clock())

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
            shed_s=(now - self.view.liveness_now(now)).total_seconds()
            if self.view.shedding(now) else None,
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
                                    "obligations": ObligationsScreen,
                                    "alerts": AlertsScreen, "jobs": JobsScreen}[name]
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

    def sort_fleet(self, key: str, reverse: bool) -> None:
        self.show_view("fleet")

        def apply() -> None:
            screen = self.view_screen
            if isinstance(screen, FleetScreen):
                screen.sort_by(key, reverse)

        self.call_after_refresh(apply)

    # -------------------------------------------------------------------- help

    def show_help(self, screen: ViewScreen) -> None:
        rows = key_rows(screen, self.keymap, self._key_display)
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

    def run_mutation(self, steps: Coroutine[Any, Any, None], name: str) -> None:
        """Run a screen's mutation flow (``screens/mutation_flows.py``) as the one open flow:
        the screens' action keys are off until it ends. The app owns the worker, so the flow
        ends (and ``mutation_pending`` clears) even if the screen that started it is gone."""
        self.mutation_pending = True
        self.refresh_bindings()
        self.run_worker(self._mutation(steps), name=name, group="mutation")

    async def _mutation(self, steps: Coroutine[Any, Any, None]) -> None:
        try:
            await steps
        finally:
            self.mutation_pending = False
            self.refresh_bindings()

    # -------------------------------------------------------------- connection

    def switch_context(self, name: str) -> None:
        """``:ctx NAME``: drop this gateway session and its state, open ``NAME``'s."""
        try:
            conn = resolve_connection(context=name)
        except ConfigError as exc:
            self.notify(str(exc), title=":ctx", severity="error")
            return
        self.source.stop()
        self.workers.cancel_group(self, "feed")
        self.workers.cancel_group(self, "ping")
        self.workers.cancel_group(self, "jobs")
        self.job_watch.reset()
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
