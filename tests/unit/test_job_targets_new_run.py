"""A retry job's items name the new run each retry made (``new_run_id``), in a journal made
now and in one from before the column (it is added at start-up, its rows kept)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from console.gateway.job_store import JobStore, NewJob
from console.gateway.journal_engines import open_journal

OLD_TARGETS = """CREATE TABLE irq_job_targets (
    job_id TEXT NOT NULL, idx INTEGER NOT NULL, target TEXT NOT NULL, status TEXT NOT NULL,
    outcome TEXT NOT NULL DEFAULT '', error TEXT, detail TEXT NOT NULL DEFAULT '', at TEXT,
    PRIMARY KEY (job_id, idx))"""


def _retry(store: JobStore, job_id: str) -> None:
    assert store.create(job_id, NewJob(
        action="retry", targets=["dbos:local/a", "dbos:local/b"], filter="state:failed",
        reason="fixed", rate_per_s=5.0, created_by="olga", role="operator"))
    store.record(job_id, 0, ok=True, outcome="applied", error=None, detail="forked",
                 new_run_id="dbos:local/a-fork")
    store.record(job_id, 1, ok=True, outcome="applied", error=None, detail="in place")


def test_each_item_names_its_new_run(tmp_path: Path) -> None:
    journal = open_journal(tmp_path / "journal.db")
    try:
        store = JobStore(journal, "gw-a")
        _retry(store, "job-1")
        assert [(t.target, t.new_run_id) for t in store.targets("job-1")] == [
            ("dbos:local/a", "dbos:local/a-fork"), ("dbos:local/b", None)]
        assert store.targets("job-1")[0].contract()["new_run_id"] == "dbos:local/a-fork"
    finally:
        journal.close()


def test_a_journal_from_before_the_column_gets_it_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    with sqlite3.connect(path) as db:
        db.execute(OLD_TARGETS)
        db.execute("INSERT INTO irq_job_targets (job_id, idx, target, status) VALUES"
                   " ('old', 0, 'dbos:local/z', 'done')")
    journal = open_journal(path)
    try:
        store = JobStore(journal, "gw-a")
        assert [(t.target, t.new_run_id) for t in store.targets("old")] == [
            ("dbos:local/z", None)]
        _retry(store, "job-2")
        assert store.targets("job-2")[0].new_run_id == "dbos:local/a-fork"
    finally:
        journal.close()
