"""Mutation flows on things that are not runs: silencing an alert (``alerts`` screen, ``s``)
and cancelling a durable bulk job (``:jobs``, ``c``). Each is the app's one mutation flow:
:class:`ConfirmDialog` (what it is, default No, a reason) -> the gateway command the CLI sends
(``irq alerts silence ID --for D``: ``alert_silence`` with ``for_s``; ``irq jobs cancel ID``:
``job_cancel``) -> :class:`ResultsDialog`. A gateway that cannot be reached reads as a failure
per target (mutation_flows.failed), never as an exception.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import Input, Static

from console.durations import parse_duration
from console.terminal_text import terminal_safe
from console.tui.job_board import JobProgress, progress_text
from console.tui.screens.mutation_flows import send_and_show
from console.tui.widgets.confirm_dialog import ConfirmDialog
from console.tui.widgets.value_editors import ValueEditor

if TYPE_CHECKING:
    from console.tui.app import IrqApp

DEFAULT_SILENCE = "2h"  # what ``irq alerts silence`` takes without --for


class DurationEditor(ValueEditor):
    """How long to silence: ``30m``, ``2h``, ``1d`` (console/durations.py, as ``--for``).
    One line: an Input, not the base class's text area (Enter there would add a line);
    Enter moves on to the reason."""

    DEFAULT_CSS = """
    DurationEditor > Input { width: 24; }
    """

    def __init__(self, text: str = DEFAULT_SILENCE, id: str | None = None) -> None:
        super().__init__(text, label="Silence for (e.g. 30m, 2h, 1d)", id=id)

    def compose(self) -> ComposeResult:
        yield Static(self.label, classes="editor-label")
        field = Input(self.initial, compact=True, id="duration")
        field.cursor_blink = False
        yield field
        yield Static("", classes="editor-status")

    def focus_field(self) -> None:
        field = self.query_one("#duration", Input)
        field.focus()
        field.select_all()  # typing replaces the default

    @on(Input.Changed, "#duration")
    def _typed(self, event: Input.Changed) -> None:
        event.stop()
        self._check(event.value)

    @on(Input.Submitted, "#duration")
    def _done(self, event: Input.Submitted) -> None:
        event.stop()
        self.screen.focus_next()

    def evaluate(self, text: str) -> tuple[Any, str | None, str]:
        try:
            seconds = parse_duration(text).total_seconds()
        except ValueError as exc:
            return None, str(exc), ""
        return seconds, None, f"no bell, bar or notification for {text.strip()}"


async def alert_silence_steps(app: IrqApp, alert_id: str) -> None:
    """Silence an alert for a time: confirm with the duration and a reason (required),
    ``alert_silence`` with ``for_s``, results."""
    alert = app.view.alerts[alert_id]
    head = Text()
    head.append(f"{terminal_safe(alert.detail or alert.kind)}\n", style="bold")
    head.append(terminal_safe(f"{alert.kind}, {alert.run or alert.subject}"), style="dim")
    head.append("\nit still clears by itself; the reason is kept and audited (required)")
    editor = DurationEditor()
    dialog = ConfirmDialog(title="Silence alert?", verb="silence", targets=[alert_id],
                           details=head, editor=editor, glyphs=app.glyphs,
                           ascii_only=app.ascii_only)
    outcome = await app.push_screen_wait(dialog)
    if outcome is None:
        app.notify("silence: nothing sent", timeout=3)
        return
    if not outcome.reason:
        app.notify("silence: a reason is required; nothing sent", severity="error")
        return
    await send_and_show(app, "Silence", "alert_silence", alert_id, outcome.reason,
                         extra={"for_s": float(outcome.value)})


async def job_cancel_steps(app: IrqApp, job: JobProgress) -> None:
    """Cancel a running job: confirm (its progress, what will not be sent, a reason),
    ``job_cancel``, results. The targets in flight settle; the rest are not sent."""
    head = Text()
    head.append(f"{terminal_safe(job.action)} {progress_text(job)}", style="bold")
    head.append(f", {job.failed:,} failed, {job.remaining:,} not sent yet\n")
    if job.filter:
        head.append(terminal_safe(f"filter {job.filter}"), style="dim")
        head.append("\n")
    head.append(terminal_safe(f"created by {job.created_by}"), style="dim")
    head.append("\nthe targets in flight settle; the remaining ones are not sent")
    dialog = ConfirmDialog(title="Cancel job?", verb="cancel job", targets=[job.id],
                           details=head, danger=True, glyphs=app.glyphs,
                           ascii_only=app.ascii_only)
    outcome = await app.push_screen_wait(dialog)
    if outcome is None:
        app.notify("cancel job: nothing sent", timeout=3)
        return
    await send_and_show(app, "Cancel job", "job_cancel", job.id, outcome.reason)
    app.job_watch.poke()
