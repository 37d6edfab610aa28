"""``:jobs`` (or ``5``): the durable bulk jobs the gateway drives, newest first -- state,
action, progress, failures -- and under the table the selected job's detail with every
failure and its reason (the ``job`` query, as ``irq jobs show``). ``c`` cancels the selected
running job (confirmed, default No: ``named_flows.py``). The list comes from the app's
:class:`JobWatch`; filters, ids and reasons come from operators: shown inert."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from console.client import GatewayError
from console.terminal_text import terminal_safe
from console.tui.inert_text import inert
from console.tui.job_board import JobProgress, progress_text
from console.tui.messages import FleetChange
from console.tui.screens import named_flows
from console.tui.screens.base import ViewScreen, selected_row_key
from console.tui.widgets.table_fit import fit_columns

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


class JobsScreen(ViewScreen):
    VIEW_NAME = "jobs"

    BINDINGS = [Binding("c", "cancel_job", "cancel job", id="job_cancel")]

    def __init__(self) -> None:
        super().__init__()
        self._filter = ""
        self._shown: list[str] = []
        #: the selected job's ``job`` answer, and the counts it was fetched at
        self._detail: tuple[str, tuple[int, int, str], dict[str, Any]] | None = None

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield Static("", id="jobs-title", classes="view-title")
        yield DataTable(cursor_type="row", id="jobs-table", zebra_stripes=False)
        yield Static("", id="job-detail")
        yield from self.compose_bottom()

    @property
    def table(self) -> DataTable[str | Text]:
        return self.query_one("#jobs-table", DataTable)

    def on_mount(self) -> None:
        super().on_mount()
        t = self.table
        t.add_column("STATE", key="state", width=9)
        t.add_column("JOB", key="job", width=14)
        t.add_column("ACTION", key="action", width=9)
        t.add_column("PROGRESS", key="progress", width=13)
        t.add_column("FAILED", key="failed", width=6)
        t.add_column("FILTER", key="filter", width=20)
        self._rebuild()
        t.focus()
        self.irq.job_watch.poke()  # the list as it is now, not as of the last idle poll

    def on_resize(self) -> None:
        fit_columns(self.table, self.size.width,
                    {"state": 9, "job": 14, "action": 9, "progress": 13, "failed": 6},
                    {"filter": (2, 8)})

    def focus_main(self) -> None:
        self.table.focus()

    def _items(self) -> list[JobProgress]:
        items = list(self.irq.job_watch.jobs)
        if self._filter:
            words = self._filter.lower().split()
            items = [j for j in items if all(
                w in f"{j.id} {j.action} {j.state} {j.filter} {j.created_by}".lower()
                for w in words)]
        return items

    def jobs_changed(self) -> None:
        self._rebuild()

    def fleet_changed(self, change: FleetChange) -> None:
        if change.runs is None:
            self._rebuild()

    def _rebuild(self) -> None:
        table = self.table
        selected = selected_row_key(table)
        items = self._items()
        table.clear()
        for j in items:
            table.add_row(Text(j.state, style=STATE_STYLE.get(j.state, "")), inert(j.id),
                          inert(j.action), Text(progress_text(j)),
                          Text(f"{j.failed:,}", style="bold red" if j.failed else "dim"),
                          inert(j.filter or "-"), key=j.id)
        self._shown = [j.id for j in items]
        if selected in self._shown:
            table.move_cursor(row=self._shown.index(selected), animate=False)
        running = sum(1 for j in items if j.state == "running")
        title = Text(f" Jobs: {running} running, {len(items) - running} finished",
                     style="bold")
        if not self.irq.job_watch.supported:
            title = Text(" Jobs: this gateway runs no bulk jobs", style="bold")
        if self._filter:
            title.append(terminal_safe(f"  /{self._filter} ({len(items)} shown)"))
        self.query_one("#jobs-title", Static).update(title)
        self._show_detail()
        self.refresh_bindings()

    def selected_job(self) -> JobProgress | None:
        key = selected_row_key(self.table)
        return next((j for j in self.irq.job_watch.jobs if j.id == key), None)

    def _show_detail(self) -> None:
        pane = self.query_one("#job-detail", Static)
        job = self.selected_job()
        if job is None:
            pane.update(Text("No jobs. A --filter on an action or a decision creates one "
                             "(irq pause --filter TEXT --detach).", style="dim"))
            return
        stamp = (job.done, job.failed, job.state)
        known = self._detail if self._detail is not None and self._detail[0] == job.id \
            else None
        pane.update(job_detail(job, known[2] if known else None, self.irq.glyphs.separator))
        if job.failed and (known is None or known[1] != stamp):
            self._fetch_detail(job.id, stamp)

    @work(exclusive=True, group="job-detail")
    async def _fetch_detail(self, job_id: str, stamp: tuple[int, int, str]) -> None:
        try:
            answer = await self.irq.source.query("job", job_id=job_id)
        except GatewayError:
            return  # the counts stay; the failures come with the next change
        if isinstance(answer, dict):
            self._detail = (job_id, stamp, answer)
            self._show_detail()

    def current_filter(self) -> str:
        return self._filter

    def apply_filter(self, text: str) -> None:
        self._filter = text.strip()
        self._rebuild()

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
        allowed, why = irq.may_mutate()
        if job is None or job.state != "running":
            irq.notify("cancel job: no running job selected", severity="warning")
            return
        if not allowed:
            irq.notify(f"cancel job: {why}", title="Not allowed", severity="error")
            return
        if irq.mutation_pending:
            return
        irq.run_mutation(named_flows.job_cancel_steps(irq, job), "_job_flow")

    @on(DataTable.RowHighlighted, "#jobs-table")
    def _highlighted(self) -> None:
        self._show_detail()
        self.refresh_bindings()
