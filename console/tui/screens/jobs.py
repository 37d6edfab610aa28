"""``:jobs`` (or ``5``): the durable bulk jobs the gateway drives, newest first -- state,
action, progress, failures -- and under the table the selected job's detail with every
failure and its reason (the ``job`` query, as ``irq jobs show``). ``c`` cancels the selected
running job (confirmed, default No: ``named_flows.py``). The list comes from the app's
:class:`JobWatch`; filters, ids and reasons come from operators: shown inert."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import work
from textual.binding import Binding

from console.client import GatewayError
from console.terminal_text import terminal_safe
from console.tui.inert_text import inert
from console.tui.job_board import JobProgress, progress_text
from console.tui.messages import FleetChange
from console.tui.screens import named_flows
from console.tui.screens.list_screen import Column, ListScreen

STATE_STYLE = {"running": "bold green", "done": "dim", "cancelled": "yellow"}
#: failures listed under the table (the rest: ``irq jobs show ID``)
FAILURES_SHOWN = 6


def job_detail(job: JobProgress, detail: dict[str, Any] | None, sep: str) -> Text:
    """The selected job: counts, filter, who and why, then its failures with reasons."""
    text = Text()
    text.append(f"{terminal_safe(job.id)}  ", style="bold")
    text.append(job.state, style=STATE_STYLE.get(job.state, ""))
    text.append(f"  {terminal_safe(job.action)} {progress_text(job)} {sep} ")
    text.append(f"{job.failed:,} failed", style="bold red" if job.failed else "")
    text.append(f" {sep} {job.remaining:,} remaining {sep} {job.rate_per_s:g}/s")
    text.append("\nfilter ", style="bold")
    text.append(inert(job.filter or "-"))
    text.append("  by ", style="bold")
    text.append(inert(job.created_by))
    if job.reason:
        text.append(f" {sep} ")
        text.append(inert(job.reason))
    if detail is None:
        return text
    failures = [f for f in detail.get("failures") or [] if isinstance(f, dict)]
    if failures:
        text.append(f"\nfailed {len(failures):,}", style="bold red")
        text.append(f" {sep} all of them: irq jobs show {job.id}", style="dim")
    for f in failures[:FAILURES_SHOWN]:
        text.append("\n")
        text.append(inert(str(f.get("target", "")).split("/", 1)[-1], "bold red"))
        text.append(f"  {terminal_safe(str(f.get('outcome') or ''))}", style="red")
        reason = f.get("detail") or f.get("error") or ""
        if reason:
            text.append(" ")
            text.append(inert(str(reason)))
    return text


class JobsScreen(ListScreen[JobProgress]):
    VIEW_NAME = "jobs"
    NAME, DETAIL_ID = "jobs", "job-detail"
    COLUMNS = (Column("STATE", "state", 9), Column("JOB", "job", 14),
               Column("ACTION", "action", 9), Column("PROGRESS", "progress", 13),
               Column("FAILED", "failed", 6), Column("FILTER", "filter", 20, share=(2, 8)))
    EMPTY = ("No jobs. A --filter on an action or a decision creates one "
             "(irq pause --filter TEXT --detach).")

    BINDINGS = [Binding("c", "cancel_job", "cancel job", id="job_cancel")]

    def __init__(self) -> None:
        super().__init__()
        #: the selected job's ``job`` answer, and the counts it was fetched at
        self._detail: tuple[str, tuple[int, int, str], dict[str, Any]] | None = None

    def on_mount(self) -> None:  # Textual calls ListScreen's own on_mount after this one
        self.irq.job_watch.poke()  # the list as it is now, not as of the last idle poll

    def listed(self) -> list[JobProgress]:
        return list(self.irq.job_watch.jobs)

    def key_of(self, item: JobProgress) -> str:
        return item.id

    def haystack(self, item: JobProgress) -> str:
        return f"{item.id} {item.action} {item.state} {item.filter} {item.created_by}"

    def cells(self, item: JobProgress) -> tuple[str | Text, ...]:
        return (Text(item.state, style=STATE_STYLE.get(item.state, "")), inert(item.id),
                inert(item.action), Text(progress_text(item)),
                Text(f"{item.failed:,}", style="bold red" if item.failed else "dim"),
                inert(item.filter or "-"))

    def headline(self, shown: list[JobProgress]) -> Text:
        if not self.irq.job_watch.supported:
            return Text(" Jobs: this gateway runs no bulk jobs", style="bold")
        running = sum(1 for j in shown if j.state == "running")
        return Text(f" Jobs: {running} running, {len(shown) - running} finished", style="bold")

    def find(self, key: str) -> JobProgress | None:
        return next((j for j in self.irq.job_watch.jobs if j.id == key), None)

    def selected_job(self) -> JobProgress | None:
        return self.selected_item()

    def detail(self, item: JobProgress) -> Text:
        """The job's counts and, once fetched (a job with failures: the ``job`` query, again
        when its counts move), its failures."""
        stamp = (item.done, item.failed, item.state)
        known = self._detail if self._detail is not None and self._detail[0] == item.id \
            else None
        if item.failed and (known is None or known[1] != stamp):
            self._fetch_detail(item.id, stamp)
        return job_detail(item, known[2] if known else None, self.irq.glyphs.separator)

    def jobs_changed(self) -> None:
        self._rebuild()

    def fleet_changed(self, change: FleetChange) -> None:
        if change.runs is None:
            self._rebuild()

    @work(exclusive=True, group="job-detail")
    async def _fetch_detail(self, job_id: str, stamp: tuple[int, int, str]) -> None:
        try:
            answer = await self.irq.source.query("job", job_id=job_id)
        except GatewayError:
            return  # the counts stay; the failures come with the next change
        if isinstance(answer, dict):
            self._detail = (job_id, stamp, answer)
            self.show_detail()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_job":
            if self.irq.mutation_pending:
                return False
            job = self.selected_job()
            if job is None or job.state != "running":
                return None
            return True if self.irq.may_mutate()[0] else None
        return super().check_action(action, parameters)

    def action_cancel_job(self) -> None:
        irq = self.irq
        job = self.selected_job()
        if job is None or job.state != "running":
            irq.notify("cancel job: no running job selected", severity="warning")
            return
        if self.refused("cancel job"):
            return
        if irq.mutation_pending:
            return
        irq.run_mutation(named_flows.job_cancel_steps(irq, job), "_job_flow")
