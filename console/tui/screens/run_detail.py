"""One run: state and timeline, heartbeat sparkline, resources with their policies, journal
steps (what re-runs on resume), interrupts, recoverability warnings, and its audit trail.

Live fields (state, heartbeat age, resources) come from the fleet view as events arrive; the
journal, heartbeat samples and audit come from ``query("run")``, re-fetched at most every
two seconds while the run keeps changing.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import Static

from console.client import GatewayError
from console.leak_rule import leaked
from console.model import AuditEntry, Heartbeat, Interrupt, JournalStep, Run
from console.semantics import unified_state
from console.terminal_text import terminal_safe
from console.tui import run_sections as sections
from console.tui.messages import FleetChange
from console.tui.screens.base import (
    DECISION_BINDINGS,
    RUN_BINDINGS,
    ViewScreen,
    oldest_pending_interrupt,
)
from console.tui.state_display import STATE_TONE
from console.tui.widgets.sparkline import Sparkline
from console.tui.widgets.summary_line import TONE_STYLE

REFETCH_EVERY_S = 2.0


def beat_gaps(samples: list[datetime]) -> list[float]:
    ordered = sorted(samples)
    return [(b - a).total_seconds() for a, b in zip(ordered, ordered[1:], strict=False)]


class RunDetailScreen(ViewScreen):
    VIEW_NAME = "run"

    BINDINGS = [*RUN_BINDINGS, *(replace(b, show=False) for b in DECISION_BINDINGS),
                Binding("L", "release", "free a leak", show=False, id="release")]

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.journal: list[JournalStep] = []
        self.beats: list[datetime] = []
        self.audit: list[AuditEntry] = []
        self.notes: list[str] = []
        self.policy_decisions: list[sections.RunPolicyDecision] = []
        self.fetch_error: str | None = None
        self._fetched_at = 0.0
        self._dirty = False
        self._last_beat: datetime | None = None

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        with VerticalScroll(id="detail", can_focus=True):
            with Vertical(id="detail-columns"):
                with Vertical(classes="detail-col"):
                    yield Static("", id="sec-summary", classes="section")
                    yield Static("Heartbeats", classes="section-title")
                    yield Sparkline("gaps", self.irq.glyphs, id="beats")
                    yield Static("", id="sec-resources", classes="section")
                    yield Static("", id="sec-warnings", classes="section")
                    yield Static("", id="sec-timeline", classes="section")
                with Vertical(classes="detail-col"):
                    yield Static("", id="sec-journal", classes="section")
                    yield Static("", id="sec-interrupts", classes="section")
                    policy = Static("", id="sec-policy", classes="section")
                    policy.display = False  # shown once the run has policy decisions
                    yield policy
                    yield Static("", id="sec-audit", classes="section")
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#detail").focus()
        self._draw_sections()
        self.fetch()

    def on_resize(self) -> None:
        self.set_class(self.size.width >= 140, "-wide")

    def focus_main(self) -> None:
        self.query_one("#detail").focus()

    @property
    def run(self) -> Run | None:
        return self.irq.view.runs.get(self.run_id)

    # ----------------------------------------------------------------- data

    @work(exclusive=True, group="run-detail")
    async def fetch(self) -> None:
        self._fetched_at = time.monotonic()
        self._dirty = False
        try:
            data = await self.irq.source.query("run", run_id=self.run_id)
        except GatewayError as exc:
            self.fetch_error = exc.message
            self._draw_sections()
            return
        self.fetch_error = None
        self._load(data if isinstance(data, dict) else {})
        self._draw_sections()

    def _load(self, data: dict[str, Any]) -> None:
        try:
            self.journal = [JournalStep.model_validate(s) for s in data.get("journal") or []]
        except ValidationError:
            self.journal = []
        beats: list[datetime] = []
        for sample in data.get("heartbeats") or []:
            try:
                beats.append(Heartbeat.model_validate(sample).at)
            except ValidationError:
                continue
        self.beats = sorted(set(beats))
        audit: list[AuditEntry] = []
        for entry in data.get("audit") or []:
            try:
                audit.append(AuditEntry.model_validate(entry))
            except ValidationError:
                continue
        self.audit = audit
        self.policy_decisions = sections.parse_policy_decisions(data.get("policy_decisions"))
        caps = data.get("capabilities") or {}
        self.notes = [str(n) for n in caps.get("notes", [])] if isinstance(caps, dict) else []

    def fleet_changed(self, change: FleetChange) -> None:
        relevant = change.runs is None or self.run_id in change.runs
        for entry in change.audit:
            if entry.target.startswith(self.run_id):
                self.audit.append(entry)
                relevant = True
        run = self.run
        if run is not None and run.heartbeat_at and run.heartbeat_at != self._last_beat:
            if not self.beats or run.heartbeat_at > self.beats[-1]:
                self.beats.append(run.heartbeat_at)
                del self.beats[:-200]
        if relevant:
            self._dirty = True
            self._draw_sections()

    def tick(self) -> None:
        super().tick()
        if self._dirty and time.monotonic() - self._fetched_at >= REFETCH_EVERY_S:
            self.fetch()
        self._draw_sections()

    # ------------------------------------------------------------- rendering

    def _draw_sections(self) -> None:
        g = self.irq.glyphs
        now = self.irq.liveness_clock()
        run = self.run
        try:
            summary = self.query_one("#sec-summary", Static)
        except NoMatches:  # a fetch that finished as the screen closed: nothing to draw on
            return
        if run is None:
            summary.update(Text(f"{terminal_safe(self.run_id)}\n"
                                "not in the fleet (removed, or not yet seen)", style="bold red"))
            return
        self._last_beat = run.heartbeat_at
        state = unified_state(run, now)
        body: Any = sections.summary(run, state, now, g)
        if self.fetch_error:
            body = Group(body, Text(f"{g.stale} details unavailable: "
                                    f"{terminal_safe(self.fetch_error)}", style="red"))
        summary.update(body)
        gaps = beat_gaps(self.beats)
        tone = {"late": "yellow", "lost": "red"}.get(state.value, "green")
        last = f"last {gaps[-1]:.1f}s" if gaps else "no samples"
        self.query_one("#beats", Sparkline).set_values(
            gaps, f"{len(self.beats)} beats, {last}",
            ceiling=run.heartbeat_timeout_s or None, tone=tone)
        self.query_one("#sec-resources", Static).update(sections.section(
            "Resources (L frees a leak)" if leaked(run.resources, run.state.value)
            else "Resources",
            sections.resources(run, g)))
        self.query_one("#sec-warnings", Static).update(
            sections.section("Recoverability", sections.warnings(run, self.notes, g)))
        self.query_one("#sec-timeline", Static).update(
            sections.section("Timeline", sections.timeline(self._timeline(), g)))
        self.query_one("#sec-journal", Static).update(
            sections.section("Journal", sections.journal(self.journal, g)))
        intrs = [i for i in self.irq.view.interrupts.values() if i.run_id == self.run_id]
        intrs.sort(key=lambda i: i.created_at)
        self.query_one("#sec-interrupts", Static).update(
            sections.section("Interrupts", sections.interrupts(intrs, now, g)))
        policy = self.query_one("#sec-policy", Static)
        policy.display = bool(self.policy_decisions)  # runs without a policy: no section
        policy.update(sections.section("Policy decisions",
                                       sections.policy_decisions(self.policy_decisions, g)))
        self.query_one("#sec-audit", Static).update(
            sections.section("Audit", sections.audit(self.audit, g)))

    def _timeline(self) -> list[tuple[datetime, str, str]]:
        entries: list[tuple[datetime, str, str]] = []
        run = self.run
        if run is not None and run.started_at:
            entries.append((run.started_at, "started", "dim"))
        g = self.irq.glyphs
        for at, state in self.irq.timeline.get(self.run_id, []):
            entries.append((at, f"{g.states[state]} {state.value}",
                            TONE_STYLE[STATE_TONE[state]]))
        for e in self.audit:
            who = f"{e.action} by {e.identity}: {e.outcome}"
            if e.reason:
                who += f" ({e.reason})"
            entries.append((e.at, who, "bold" if e.outcome == "applied" else "red"))
        entries.sort(key=lambda item: item[0])
        return entries

    # ------------------------------------------------------------ selection

    def selected_run_ids(self) -> list[str]:
        return [self.run_id] if self.run is not None else []

    def selected_interrupt(self) -> Interrupt | None:
        return oldest_pending_interrupt(self.irq.view, self.run_id)

    def action_release(self) -> None:
        """``L``: force the run's first suspected leak free (``:release RESOURCE`` names
        another, or a resource still held)."""
        run = self.run
        leaks = leaked(run.resources, run.state.value) if run else []
        if not leaks:
            self.irq.notify("no suspected leak on this run (:release RESOURCE frees a held "
                            "one)", severity="warning")
            return
        if len(leaks) > 1:
            self.irq.notify(f"also suspected: {', '.join(terminal_safe(x) for x in leaks[1:])}"
                            " (:release RESOURCE)", timeout=6)
        self.request_release(self.run_id, leaks[0])
