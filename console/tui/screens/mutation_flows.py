"""The steps of the screens' mutations, each run as the app's one mutation flow.

Run actions and decisions (any view), obligations (``o``) and a forced release (``L`` on a
run, ``:release``): dry run (the gateway's plan; run actions and releases only) ->
:class:`ConfirmDialog` (targets, plan, reason, default No) -> the real command ->
:class:`ResultsDialog` (per-item outcome). The screens check permissions and the
selection and start these through :meth:`IrqApp.run_mutation`; a failure to reach the
gateway is reported per target, never raised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import RenderableType
from rich.text import Text

from console.client import GatewayError
from console.model import Action, CommandResult, Decision, DecisionKind
from console.terminal_text import terminal_safe
from console.tui.decision_dialog import (
    decision_details,
    decision_editor,
    decision_from,
    decision_verb,
)
from console.tui.marks import clear_sent_marks
from console.tui.obligation_book import due_text
from console.tui.widgets.confirm_dialog import ConfirmDialog
from console.tui.widgets.results_dialog import ResultsDialog

if TYPE_CHECKING:
    from console.tui.app import IrqApp


async def action_steps(app: IrqApp, action: Action, targets: list[str]) -> None:
    """Pause, resume, cancel or terminate ``targets``: plan, confirm, send, results."""
    try:
        dry = await app.source.command(action, targets, dry_run=True)
    except GatewayError as exc:
        app.notify(exc.message, title=f"No plan for {action.value}", severity="error")
        return
    plan = next((r.plan for r in dry if r.plan is not None), None)
    problems = [r for r in dry if r.outcome not in ("applied", "planned")]
    details: RenderableType | None = None
    if problems:
        text = Text()
        for r in problems:
            text.append(terminal_safe(f"{app.glyphs.stale} {r.target}: {r.outcome}"),
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
        glyphs=app.glyphs,
        ascii_only=app.ascii_only,
    )
    outcome = await app.push_screen_wait(dialog)
    if outcome is None:
        app.notify(f"{action.value}: nothing sent", timeout=3)
        return
    results = await send(app, action, targets, reason=outcome.reason)
    clear_sent_marks(app.view_screen, results)  # applied: unmarked; failed: kept
    await app.push_screen_wait(ResultsDialog(action.value.capitalize(), results,
                                             app.glyphs, app.ascii_only))


async def decision_steps(app: IrqApp, kind: DecisionKind, interrupt_id: str) -> None:
    """Approve, edit, reject or respond to one interrupt (or decide each call of a batched
    one, or answer a native wait through one of its handlers): confirm with the editor
    (console/tui/decision_dialog.py), send, results."""
    intr = app.view.interrupts[interrupt_id]
    editor = decision_editor(intr, kind)
    verb = decision_verb(intr, kind)
    dialog = ConfirmDialog(
        title=f"{verb.capitalize()} interrupt?",
        verb=verb,
        targets=[interrupt_id],
        details=decision_details(intr, kind),
        editor=editor,
        glyphs=app.glyphs,
        ascii_only=app.ascii_only,
    )
    outcome = await app.push_screen_wait(dialog)
    if outcome is None:
        app.notify(f"{verb}: nothing sent", timeout=3)
        return
    decision = decision_from(kind, editor, outcome.value)
    results = await send(app, Action.DECIDE, [interrupt_id], reason=outcome.reason,
                         decision=decision)
    await app.push_screen_wait(ResultsDialog(verb.capitalize(), results,
                                             app.glyphs, app.ascii_only))


async def obligation_steps(app: IrqApp, verb: str, obligation_id: str) -> None:
    """Fulfil or waive an open obligation: confirm (the reason is the note, and required),
    then the gateway's ``obligation_fulfil`` / ``obligation_waive``, results."""
    ob = app.view.obligations[obligation_id]
    now = app.clock()
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
        glyphs=app.glyphs,
        ascii_only=app.ascii_only,
    )
    outcome = await app.push_screen_wait(dialog)
    if outcome is None:
        app.notify(f"{verb}: nothing sent", timeout=3)
        return
    if not outcome.reason:
        app.notify(f"{verb}: a note is required (type it as the reason); nothing sent",
                   severity="error")
        return
    await send_and_show(app, verb.capitalize(), f"obligation_{verb}", obligation_id,
                        outcome.reason)


async def send(app: IrqApp, action: Action, targets: list[str], *, reason: str,
               decision: Decision | None = None) -> list[CommandResult]:
    """The real command; an unreachable or refusing gateway reads as a failure per target."""
    try:
        results = await app.source.command(action, targets, reason=reason, decision=decision)
    except GatewayError as exc:
        return failed(app, action.value, targets, exc)
    if not results:
        return unanswered(action.value, targets)
    return results


def failed(app: IrqApp, action: str, targets: list[str], exc: GatewayError
           ) -> list[CommandResult]:
    """One failed result per target for a command the gateway did not answer with results
    (unreachable: it may still have been applied, so the operator is sent to the audit)."""
    unknown = f" {app.glyphs.dash} it may or may not have been applied: check :audit"
    detail = exc.message + (unknown if exc.code == "unreachable" else "")
    return [CommandResult(id="", action=action, target=t, outcome="failed", detail=detail,
                          error=exc.code) for t in targets]


def unanswered(action: str, targets: list[str]) -> list[CommandResult]:
    return [CommandResult(id="", action=action, target=t, outcome="failed",
                          detail="the gateway answered with no result") for t in targets]


async def alert_ack_steps(app: IrqApp, alert_id: str) -> None:
    """Acknowledge an open alert: confirm (a reason is required), ``alert_ack``, results."""
    alert = app.view.alerts[alert_id]
    head = Text()
    head.append(f"{terminal_safe(alert.detail or alert.kind)}\n", style="bold")
    head.append(terminal_safe(f"{alert.kind}, {alert.run or alert.subject}"), style="dim")
    if alert.action:
        head.append("\nto do: " + terminal_safe(alert.action))
    head.append("\nthe reason is kept with the alert and audited (required)")
    dialog = ConfirmDialog(title="Acknowledge alert?", verb="acknowledge", targets=[alert_id],
                           details=head, glyphs=app.glyphs, ascii_only=app.ascii_only)
    outcome = await app.push_screen_wait(dialog)
    if outcome is None:
        app.notify("acknowledge: nothing sent", timeout=3)
        return
    if not outcome.reason:
        app.notify("acknowledge: a reason is required; nothing sent", severity="error")
        return
    await send_and_show(app, "Acknowledge", "alert_ack", alert_id, outcome.reason)


async def release_steps(app: IrqApp, run_id: str, resource_id: str) -> None:
    """Force a resource of a run free (``irq release RUN RESOURCE --force``): the gateway's
    plan (what it will call: the kind's release_command or the agent's release callback),
    a confirmation that says it goes behind the run's back (default No), the real command,
    results (``verified`` once the run's next report says released)."""
    extra: dict[str, Any] = {"resource": resource_id}
    try:
        dry = await app.source.named_command("release", [run_id],
                                             extra={**extra, "dry_run": True})
    except GatewayError as exc:
        app.notify(exc.message, title="No plan for release", severity="error")
        return
    plan = next((r.plan for r in dry if r.plan is not None), None)
    head = Text()
    head.append(terminal_safe(f"release {resource_id} of {run_id}"), style="bold")
    head.append("\nirq cannot see the run release it itself: the run may still be using it",
                style="red")
    for r in dry:
        if r.outcome not in ("applied", "planned"):
            head.append("\n" + terminal_safe(f"{app.glyphs.stale} {r.outcome}: "
                                             f"{r.detail or r.error or ''}"), style="bold red")
    dialog = ConfirmDialog(title=f"Release {resource_id}?", verb="release", targets=[run_id],
                           plan=plan, details=head, danger=True, glyphs=app.glyphs,
                           ascii_only=app.ascii_only)
    outcome = await app.push_screen_wait(dialog)
    if outcome is None:
        app.notify("release: nothing sent", timeout=3)
        return
    await send_and_show(app, "Release", "release", run_id, outcome.reason, extra)


async def send_and_show(app: IrqApp, title: str, action: str, target: str, reason: str,
                        extra: dict[str, Any] | None = None) -> None:
    """A command that is not a run action (``named_command``, or ``job_command`` for
    ``job_*``), sent to one target; its results shown (a gateway that cannot be reached or
    answers nothing: a failure, never an exception)."""
    try:
        if action.startswith("job_"):
            results = await app.source.job_command(action, [target], reason=reason)
        else:
            results = await app.source.named_command(action, [target], reason=reason,
                                                     extra=extra)
    except GatewayError as exc:
        results = failed(app, action, [target], exc)
    if not results:
        results = unanswered(action, [target])
    await app.push_screen_wait(ResultsDialog(title, results, app.glyphs, app.ascii_only))
