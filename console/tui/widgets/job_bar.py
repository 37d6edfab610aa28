"""The job line: one line under the header (and the alert bar), shown while a durable bulk job
runs, on every view: its progress and failures ("job 3f2a: retry 412/1,000 · 3 failed");
``5`` opens ``:jobs``. Hidden when no job runs (nothing else moves)."""

from __future__ import annotations

from textual.widgets import Static

from console.tui.job_board import JobProgress, job_line_text
from console.tui.state_display import UNICODE, GlyphSet


class JobBar(Static):
    DEFAULT_CSS = """
    JobBar { height: 1; background: $accent 15%; display: none; }
    JobBar.-shown { display: block; }
    JobBar:ansi { background: ansi_default; }
    """

    def __init__(self, glyphs: GlyphSet = UNICODE, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.glyphs = glyphs
        self.jobs: list[JobProgress] = []

    def show(self, jobs: list[JobProgress]) -> None:
        if jobs == self.jobs and self.has_class("-shown") == bool(jobs):
            return
        self.jobs = jobs
        self.set_class(bool(jobs), "-shown")
        if jobs:
            self.update(job_line_text(jobs, max(20, self.size.width), g=self.glyphs),
                        layout=False)

    def on_resize(self) -> None:
        if self.jobs:
            self.update(job_line_text(self.jobs, max(20, self.size.width), g=self.glyphs),
                        layout=False)
