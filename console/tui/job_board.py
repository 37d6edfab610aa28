"""The durable bulk jobs as the TUI shows them (no Textual here): the job line under the
header ("job 3f2a: retry 412/1,000 · 3 failed") and the rows of ``:jobs``.

The gateway sends no event per job target (a job of 10,000 targets would be 10,000 frames to
every client); the app asks the ``jobs`` query instead (the same answer ``irq jobs`` prints,
DESIGN.md §5 names its fields) -- often while a job runs, rarely otherwise, and at once when
the audit shows a job created or cancelled (``job_watch.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rich.text import Text

from console.tui.state_display import UNICODE, GlyphSet, truncate_text


@dataclass(frozen=True)
class JobProgress:
    """One job of the ``jobs`` answer (the fields the TUI shows)."""

    id: str
    action: str
    state: str  # running | done | cancelled
    targets: int
    done: int
    failed: int
    remaining: int
    rate_per_s: float
    filter: str
    created_by: str
    reason: str
    created_at: datetime | None

    @classmethod
    def from_contract(cls, data: dict[str, Any]) -> JobProgress:
        created = data.get("created_at")
        return cls(
            id=str(data.get("id", "")), action=str(data.get("action", "")),
            state=str(data.get("state", "")), targets=int(data.get("targets") or 0),
            done=int(data.get("done") or 0), failed=int(data.get("failed") or 0),
            remaining=int(data.get("remaining") or 0),
            rate_per_s=float(data.get("rate_per_s") or 0.0),
            filter=str(data.get("filter") or ""), created_by=str(data.get("created_by") or ""),
            reason=str(data.get("reason") or ""),
            created_at=datetime.fromisoformat(created) if isinstance(created, str) else None)

    @property
    def short_id(self) -> str:
        """``job-3f2a9c01e4`` -> ``3f2a``: enough to tell the jobs of one screen apart."""
        return self.id.removeprefix("job-")[:4]

    @property
    def settled(self) -> int:
        return self.done + self.failed


def parse_jobs(answer: Any) -> list[JobProgress]:
    """The ``jobs`` query's answer (newest first); anything that is not a job is skipped."""
    if not isinstance(answer, list):
        return []
    jobs = []
    for item in answer:
        if isinstance(item, dict):
            try:
                jobs.append(JobProgress.from_contract(item))
            except (TypeError, ValueError):
                continue
    return jobs


def progress_text(job: JobProgress) -> str:
    """``412/1,000``: settled of all targets."""
    return f"{job.settled:,}/{job.targets:,}"


def job_summary(job: JobProgress, g: GlyphSet = UNICODE) -> Text:
    """``job 3f2a: retry 412/1,000 · 3 failed`` (the failures in red when there are any)."""
    text = Text()
    text.append(f"job {job.short_id}", style="bold")
    text.append(f": {job.action} {progress_text(job)}")
    if job.failed:
        text.append(f" {g.separator} ")
        text.append(f"{job.failed:,} failed", style="bold red")
    if job.state != "running":
        text.append(f" {g.separator} {job.state}", style="dim")
    return text


def job_line_text(jobs: list[JobProgress], width: int, key: str = "5",
                  g: GlyphSet = UNICODE) -> Text:
    """The job line: every running job, newest first, as many as fit; ``[5] jobs`` right."""
    text = Text(f" JOBS {len(jobs)} ", style="bold reverse")
    for job in jobs:
        text.append("  ")
        text.append(job_summary(job, g))
    hint = Text(f" [{key}] jobs ", style="dim")
    if text.cell_len > width - hint.cell_len:
        truncate_text(text, max(0, width - hint.cell_len), g)
    pad = max(0, width - text.cell_len - hint.cell_len)
    return text + Text(" " * pad) + hint
