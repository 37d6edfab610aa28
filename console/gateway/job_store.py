"""Durable bulk jobs in the gateway journal: the job, its targets fixed at confirmation, and
who drives it (a lease on the job's row).

``irq_jobs`` holds one row per job: the action (any command action; a decision job carries
its decision), the filter it was resolved from, the rate, the state (``running`` until every
target was sent, then ``done``; or ``cancelled``), who created and who cancelled it, and the
lease: ``holder`` drives it until ``lease_expires`` (epoch seconds; on PostgreSQL the
database's clock, as for the context leases in context_leases.py). ``irq_job_targets`` holds
one row per target in the order confirmed, ``pending`` until its command settled, then
``done`` (applied) or ``failed`` (with the command's outcome, error code and detail).

A target's command goes through the executor under the key :func:`target_key` (the job id
and the target's position): the journal's ``commands`` row under that key is what makes a
target acted on at most once, even when a gateway died between the command and this table's
update and a peer drives the job on (it gets the settled result back as a replay).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from console.gateway.journal_store import JournalStore, JournalTx
from console.model import utcnow

JobState = Literal["running", "done", "cancelled"]
#: a job lease not renewed for this long has lapsed (the driver renews it every second)
LEASE_TTL_S = 3.0

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS irq_jobs (
    id TEXT PRIMARY KEY,
    action TEXT NOT NULL,             -- the command action each target gets
    decision TEXT,                    -- a decision job: the decision body (JSON)
    merge_args INTEGER NOT NULL DEFAULT 0,  -- edit: laid over each interrupt's arguments
    filter TEXT NOT NULL DEFAULT '',
    reason TEXT NOT NULL DEFAULT '',
    rate_per_s {float} NOT NULL,
    state TEXT NOT NULL,              -- running | done | cancelled
    created_by TEXT NOT NULL,
    role TEXT NOT NULL,
    created_at TEXT NOT NULL,
    finished_at TEXT,
    cancelled_by TEXT NOT NULL DEFAULT '',
    cancel_reason TEXT NOT NULL DEFAULT '',
    holder TEXT NOT NULL DEFAULT '',  -- the gateway driving it
    lease_expires {float} NOT NULL DEFAULT 0,
    takeovers INTEGER NOT NULL DEFAULT 0,
    from_step TEXT                    -- a retry job: the first step that runs again
)""",
    """CREATE TABLE IF NOT EXISTS irq_job_targets (
    job_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    target TEXT NOT NULL,
    status TEXT NOT NULL,             -- pending | done | failed
    outcome TEXT NOT NULL DEFAULT '', -- the command's outcome (applied, conflict, failed, ...)
    error TEXT,
    detail TEXT NOT NULL DEFAULT '',
    at TEXT,
    new_run_id TEXT,                  -- a retry that made a new run (a fork): its id
    PRIMARY KEY (job_id, idx)
)""",
    "CREATE INDEX IF NOT EXISTS irq_jobs_state ON irq_jobs(state)",
)

_JOB_COLUMNS = ("id", "action", "decision", "merge_args", "filter", "reason", "rate_per_s",
                "state", "created_by", "role", "created_at", "finished_at", "cancelled_by",
                "cancel_reason", "holder", "takeovers", "from_step")


def job_id_for(key: str) -> str:
    """The job a creation key makes: the same key (a retried request) names the same job."""
    return "job-" + hashlib.sha256(key.encode()).hexdigest()[:10]


def target_key(job_id: str, index: int) -> str:
    """The idempotency key of the command a job sends to its ``index``-th target."""
    return f"{job_id}.{index}"


@dataclass(frozen=True)
class NewJob:
    action: str
    targets: Sequence[str]
    filter: str
    reason: str
    rate_per_s: float
    created_by: str
    role: str
    decision: dict[str, Any] | None = None
    merge_args: bool = False
    from_step: str | None = None  # a retry job: each target's ``--from STEP``


@dataclass(frozen=True)
class TargetRow:
    index: int
    target: str
    status: str
    outcome: str
    error: str | None
    detail: str
    new_run_id: str | None = None  # a retry that made a new run (a fork)

    def contract(self) -> dict[str, Any]:
        return {"target": self.target, "outcome": self.outcome or None, "error": self.error,
                "detail": self.detail, "new_run_id": self.new_run_id}


@dataclass(frozen=True)
class Job:
    id: str
    action: str
    decision: dict[str, Any] | None
    merge_args: bool
    filter: str
    reason: str
    rate_per_s: float
    state: JobState
    created_by: str
    role: str
    created_at: datetime
    finished_at: datetime | None
    cancelled_by: str
    cancel_reason: str
    holder: str
    takeovers: int
    counts: dict[str, int] = field(default_factory=dict)  # pending / done / failed
    from_step: str | None = None

    @property
    def label(self) -> str:
        """What the job does, as operators say it: the action, or the decision's kind."""
        if self.decision is not None:
            return str(self.decision.get("kind", self.action))
        return self.action

    def contract(self) -> dict[str, Any]:
        """The job's JSON (DESIGN.md §5): add fields, never rename them."""
        done, failed = self.counts.get("done", 0), self.counts.get("failed", 0)
        remaining = self.counts.get("pending", 0)
        return {
            "id": self.id, "action": self.label, "command": self.action,
            "filter": self.filter, "targets": done + failed + remaining, "done": done,
            "failed": failed, "remaining": remaining, "rate_per_s": self.rate_per_s,
            "state": self.state, "created_by": self.created_by, "reason": self.reason,
            "created_at": self.created_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "cancelled_by": self.cancelled_by or None,
            "cancel_reason": self.cancel_reason or None,
            "driven_by": self.holder or None, "takeovers": self.takeovers,
            "from_step": self.from_step,
        }


class JobStore:
    """Every method is one short transaction (blocking: the driver runs them in a thread)."""

    def __init__(self, journal: JournalStore, holder: str, *,
                 ttl_s: float = LEASE_TTL_S) -> None:
        self.journal = journal
        self.holder = holder
        self.ttl_s = ttl_s
        journal.create_tables(list(SCHEMA))
        self._add_column("irq_jobs", "from_step")  # retry jobs
        self._add_column("irq_job_targets", "new_run_id")  # retry jobs' new runs

    def _add_column(self, table: str, column: str) -> None:
        """A journal whose ``table`` predates ``column`` (TEXT) gets it (PostgreSQL: IF NOT
        EXISTS, two gateways starting together both succeed)."""
        with self.journal.transaction() as tx:
            if not self.journal.exclusive:  # PostgreSQL
                have = {str(r[0]) for r in tx.execute(
                    "SELECT column_name FROM information_schema.columns WHERE"
                    " table_name=? AND table_schema=current_schema()", (table,)).fetchall()}
            else:
                have = {str(r[1]) for r in tx.execute(
                    f"PRAGMA table_info({table})").fetchall()}
            if column not in have:
                exists = "" if self.journal.exclusive else " IF NOT EXISTS"
                tx.execute(f"ALTER TABLE {table} ADD COLUMN{exists} {column} TEXT")

    def _now(self, tx: JournalTx) -> float:
        if self.journal.exclusive:
            return time.time()
        return float(tx.execute("SELECT extract(epoch from clock_timestamp())").fetchone()[0])

    # ---------------------------------------------------------------------- writes

    def create(self, job_id: str, new: NewJob) -> bool:
        """Record the job and its targets; False when ``job_id`` exists (a retried request)."""
        with self.journal.transaction() as tx:
            cur = tx.execute(
                "INSERT INTO irq_jobs (id, action, decision, merge_args, filter, reason,"
                " rate_per_s, state, created_by, role, created_at, from_step) VALUES"
                " (?,?,?,?,?,?,?, 'running', ?,?,?,?) ON CONFLICT (id) DO NOTHING",
                (job_id, new.action,
                 json.dumps(new.decision) if new.decision is not None else None,
                 int(new.merge_args), new.filter, new.reason, new.rate_per_s, new.created_by,
                 new.role, utcnow().isoformat(), new.from_step))
            if cur.rowcount != 1:
                return False
            tx.executemany(
                "INSERT INTO irq_job_targets (job_id, idx, target, status) VALUES"
                " (?,?,?, 'pending')", [(job_id, i, t) for i, t in enumerate(new.targets)])
        return True

    def cancel(self, job_id: str, identity: str, reason: str) -> bool:
        """Stop a running job (what is in flight settles; the rest stays ``remaining``)."""
        with self.journal.transaction() as tx:
            cur = tx.execute(
                "UPDATE irq_jobs SET state='cancelled', finished_at=?, cancelled_by=?,"
                " cancel_reason=? WHERE id=? AND state='running'",
                (utcnow().isoformat(), identity, reason, job_id))
            return cur.rowcount == 1

    def record(self, job_id: str, index: int, *, ok: bool, outcome: str,
               error: str | None, detail: str, new_run_id: str | None = None) -> None:
        """A target's command settled (a second record of the same target changes nothing);
        ``new_run_id``: the run a retry made (a fork), which carries the work on."""
        with self.journal.transaction() as tx:
            tx.execute(
                "UPDATE irq_job_targets SET status=?, outcome=?, error=?, detail=?, at=?,"
                " new_run_id=? WHERE job_id=? AND idx=? AND status='pending'",
                ("done" if ok else "failed", outcome, error, detail, utcnow().isoformat(),
                 new_run_id, job_id, index))

    def finish_if_sent(self, job_id: str) -> bool:
        """``done`` once no target is pending (True when this call finished it)."""
        with self.journal.transaction() as tx:
            cur = tx.execute(
                "UPDATE irq_jobs SET state='done', finished_at=? WHERE id=? AND"
                " state='running' AND NOT EXISTS (SELECT 1 FROM irq_job_targets WHERE"
                " job_id=? AND status='pending')", (utcnow().isoformat(), job_id, job_id))
            return cur.rowcount == 1

    # ---------------------------------------------------------------------- leases

    def lease_round(self) -> set[str]:
        """Renew the leases of the running jobs this gateway drives and take the free or
        lapsed ones; the ids of the running jobs it drives now. On the exclusive (SQLite)
        journal every running job is this gateway's."""
        with self.journal.transaction() as tx:
            now = self._now(tx)
            until = now + self.ttl_s
            if self.journal.exclusive:
                tx.execute("UPDATE irq_jobs SET holder=?, lease_expires=? WHERE"
                           " state='running'", (self.holder, until))
            else:
                tx.execute("UPDATE irq_jobs SET lease_expires=? WHERE holder=? AND"
                           " state='running' AND lease_expires>=?", (until, self.holder, now))
                # of two gateways reaching for a lapsed lease, the UPDATE's row lock lets
                # exactly one see it lapsed
                tx.execute(
                    "UPDATE irq_jobs SET holder=?, lease_expires=?,"
                    " takeovers=takeovers + CASE WHEN holder='' THEN 0 ELSE 1 END"
                    " WHERE state='running' AND (holder='' OR lease_expires<?)",
                    (self.holder, until, now))
            rows = tx.execute("SELECT id FROM irq_jobs WHERE state='running' AND holder=?",
                              (self.holder,)).fetchall()
        return {str(r[0]) for r in rows}

    def release(self, job_ids: Sequence[str]) -> None:
        """A clean stop: a peer takes these jobs over at its next round."""
        with self.journal.transaction() as tx:
            for job_id in job_ids:
                tx.execute("UPDATE irq_jobs SET holder='', lease_expires=0 WHERE id=? AND"
                           " holder=?", (job_id, self.holder))

    # ----------------------------------------------------------------------- reads

    def job(self, job_id: str) -> Job | None:
        with self.journal.transaction() as tx:
            row = tx.execute(f"SELECT {', '.join(_JOB_COLUMNS)} FROM irq_jobs WHERE id=?",
                             (job_id,)).fetchone()
            if row is None:
                return None
            return _job(row, _counts(tx, [job_id]).get(job_id, {}))

    def jobs(self, limit: int = 100) -> list[Job]:
        """Newest first."""
        with self.journal.transaction() as tx:
            rows = tx.execute(f"SELECT {', '.join(_JOB_COLUMNS)} FROM irq_jobs"
                              " ORDER BY created_at DESC LIMIT ?", (limit,)).fetchall()
            counts = _counts(tx, [str(r[0]) for r in rows])
        return [_job(r, counts.get(str(r[0]), {})) for r in rows]

    def targets(self, job_id: str, status: str | None = None) -> list[TargetRow]:
        sql = ("SELECT idx, target, status, outcome, error, detail, new_run_id"
               " FROM irq_job_targets WHERE job_id=?")
        args: tuple[Any, ...] = (job_id,)
        if status is not None:
            sql += " AND status=?"
            args = (job_id, status)
        with self.journal.transaction() as tx:
            rows = tx.execute(sql + " ORDER BY idx", args).fetchall()
        return [TargetRow(int(r[0]), str(r[1]), str(r[2]), str(r[3] or ""), r[4], str(r[5]),
                          r[6]) for r in rows]


def _counts(tx: JournalTx, job_ids: list[str]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    if not job_ids:
        return out
    marks = ",".join("?" * len(job_ids))
    for job_id, status, count in tx.execute(
            f"SELECT job_id, status, COUNT(*) FROM irq_job_targets WHERE job_id IN ({marks})"
            " GROUP BY job_id, status", job_ids).fetchall():
        out.setdefault(str(job_id), {})[str(status)] = int(count)
    return out


def _job(row: Sequence[Any], counts: dict[str, int]) -> Job:
    d = dict(zip(_JOB_COLUMNS, row, strict=True))
    return Job(
        id=d["id"], action=d["action"],
        decision=json.loads(d["decision"]) if d["decision"] else None,
        merge_args=bool(d["merge_args"]), filter=d["filter"], reason=d["reason"],
        rate_per_s=float(d["rate_per_s"]), state=d["state"], created_by=d["created_by"],
        role=d["role"], created_at=datetime.fromisoformat(d["created_at"]),
        finished_at=datetime.fromisoformat(d["finished_at"]) if d["finished_at"] else None,
        cancelled_by=d["cancelled_by"], cancel_reason=d["cancel_reason"], holder=d["holder"],
        takeovers=int(d["takeovers"] or 0), counts=counts, from_step=d["from_step"])
