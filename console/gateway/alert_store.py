"""Alerts in the gateway's journal (the same database as its other tables, SQLite or
PostgreSQL: journal_store.py), so they survive a restart and are shared by the gateways on
one PostgreSQL.

Raised once: ``open_key`` (``kind:subject``) is unique and set while an alert is not cleared,
so :meth:`AlertStore.raise_alert` is an insert-if-absent: of two gateways raising the same
condition at once exactly one gets the row (and sends its notifications). Clearing sets
``open_key`` to NULL (several cleared rows of one key may exist). Acknowledging and silencing
are written with the command's row and final outcome in one transaction (as obligation
commands are: obligation_store.py), so a crash can leave neither half done.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from console.alert_model import Alert, Condition
from console.gateway.journal_store import JournalStore, JournalTx
from console.gateway.obligation_store import record_command

CLEARED_IN_SNAPSHOT = 50  # cleared alerts a snapshot carries (newest first)

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS alerts (
    id TEXT PRIMARY KEY,
    open_key TEXT UNIQUE,             -- kind:subject while open or acknowledged, else NULL
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    run_id TEXT,
    backend TEXT NOT NULL DEFAULT '',
    context TEXT NOT NULL DEFAULT '',
    since TEXT NOT NULL,
    raised_at TEXT NOT NULL,
    raised_by TEXT NOT NULL DEFAULT '',  -- the gateway that raised it
    detail TEXT NOT NULL DEFAULT '',
    action TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL,              -- open | acknowledged | cleared
    acked_by TEXT,
    acked_at TEXT,
    ack_reason TEXT NOT NULL DEFAULT '',
    silenced_until TEXT,
    silenced_by TEXT,
    cleared_at TEXT,
    attempt INTEGER,
    facts TEXT NOT NULL DEFAULT '{{}}'
)""",
    "CREATE INDEX IF NOT EXISTS alerts_state ON alerts(state)",
    "CREATE INDEX IF NOT EXISTS alerts_subject ON alerts(kind, subject)",
)

_COLUMNS = ("id", "kind", "subject", "run_id", "backend", "context", "since", "raised_at",
            "detail", "action", "state", "acked_by", "acked_at", "ack_reason", "silenced_until",
            "silenced_by", "cleared_at", "attempt", "facts")


@dataclass(frozen=True)
class AlertChange:
    """What an operator command on one alert came to."""

    outcome: str  # applied | conflict | failed
    error: str | None
    detail: str
    alert: Alert | None


class AlertStore:
    def __init__(self, journal: JournalStore) -> None:
        self.journal = journal
        journal.create_tables(_SCHEMA)

    def raise_alert(self, cond: Condition, since: datetime, now: datetime,
                    raised_by: str = "") -> Alert | None:
        """The new alert, or None when one is open for the condition already (raised here
        earlier, or by another gateway). A silence set on the key's last alert that still
        runs carries over: the same condition back within the silence stays quiet."""
        alert_id = "al-" + uuid.uuid4().hex[:12]
        with self.journal.transaction() as db:
            last = db.execute(
                "SELECT silenced_until, silenced_by FROM alerts WHERE kind=? AND subject=?"
                " AND silenced_until IS NOT NULL AND silenced_until > ? ORDER BY raised_at DESC"
                " LIMIT 1", (cond.kind.value, cond.subject, _iso(now))).fetchone()
            cur = db.execute(
                "INSERT INTO alerts (id, open_key, kind, subject, run_id, backend, context,"
                " since, raised_at, raised_by, detail, action, state, silenced_until,"
                " silenced_by, attempt, facts) VALUES (?,?,?,?,?,?,?,?,?,?,?,?, 'open', ?,?,?,?)"
                " ON CONFLICT (open_key) DO NOTHING",
                (alert_id, cond.key, cond.kind.value, cond.subject, cond.run, cond.backend,
                 cond.context, _iso(since), _iso(now), raised_by, cond.detail, cond.action,
                 last[0] if last else None, last[1] if last else None, cond.attempt,
                 json.dumps(cond.facts, default=str)))
            if cur.rowcount != 1:
                return None
            return _select(db, "WHERE id=?", (alert_id,))[0]

    def update_facts(self, alert_id: str, cond: Condition) -> Alert | None:
        """The condition's detail or attempt moved on (a retrying step's next attempt)."""
        with self.journal.transaction() as db:
            cur = db.execute(
                "UPDATE alerts SET detail=?, action=?, attempt=?, facts=? WHERE id=? AND"
                " open_key IS NOT NULL", (cond.detail, cond.action, cond.attempt,
                                          json.dumps(cond.facts, default=str), alert_id))
            return _select(db, "WHERE id=?", (alert_id,))[0] if cur.rowcount == 1 else None

    def clear(self, alert_id: str, now: datetime) -> Alert | None:
        """Cleared by itself (its condition ended); None when it was cleared already."""
        with self.journal.transaction() as db:
            cur = db.execute(
                "UPDATE alerts SET state='cleared', open_key=NULL, cleared_at=? WHERE id=? AND"
                " open_key IS NOT NULL", (_iso(now), alert_id))
            return _select(db, "WHERE id=?", (alert_id,))[0] if cur.rowcount == 1 else None

    def acknowledge(self, alert_id: str, *, by: str, reason: str, at: datetime,
                    command: dict[str, Any]) -> AlertChange:
        """``command``: key, action, identity, role (the ``commands`` row's columns)."""
        with self.journal.transaction() as db:
            found = _select(db, "WHERE id=?", (alert_id,))
            if not found:
                change = AlertChange("failed", "not_found", f"no such alert: {alert_id}", None)
            elif found[0].state != "open":
                al = found[0]
                by_whom = f" by {al.acked_by}" if al.acked_by else ""
                change = AlertChange("conflict", "conflict",
                                     f"alert is already {al.state}{by_whom}", al)
            else:
                db.execute("UPDATE alerts SET state='acknowledged', acked_by=?, acked_at=?,"
                           " ack_reason=? WHERE id=? AND state='open'",
                           (by, _iso(at), reason, alert_id))
                al = _select(db, "WHERE id=?", (alert_id,))[0]
                change = AlertChange("applied", None, f"{alert_id} acknowledged by {by}", al)
            record_command(db, target=alert_id, reason=reason, outcome=change.outcome,
                           error=change.error, detail=change.detail, at=at, **command)
        return change

    def silence(self, alert_id: str, until: datetime, *, by: str, reason: str, at: datetime,
                command: dict[str, Any]) -> AlertChange:
        with self.journal.transaction() as db:
            found = _select(db, "WHERE id=?", (alert_id,))
            if not found:
                change = AlertChange("failed", "not_found", f"no such alert: {alert_id}", None)
            elif found[0].state == "cleared":
                change = AlertChange("conflict", "conflict", "alert is already cleared",
                                     found[0])
            else:
                db.execute("UPDATE alerts SET silenced_until=?, silenced_by=? WHERE id=?",
                           (_iso(until), by, alert_id))
                al = _select(db, "WHERE id=?", (alert_id,))[0]
                change = AlertChange("applied", None, f"{alert_id} silenced until "
                                     f"{until.isoformat(timespec='seconds')} by {by}", al)
            record_command(db, target=alert_id, reason=reason, outcome=change.outcome,
                           error=change.error, detail=change.detail, at=at, **command)
        return change

    # -------------------------------------------------------------------------- reads

    def prune(self, before: datetime) -> int:
        """Cleared alerts whose condition ended before ``before`` leave the journal (the
        retention, retention.py); open and acknowledged ones stay, and so does the audit."""
        with self.journal.transaction() as db:
            gone = db.execute("DELETE FROM alerts WHERE open_key IS NULL AND cleared_at IS NOT"
                              " NULL AND cleared_at < ?", (_iso(before),)).rowcount
        return max(gone, 0)

    def get(self, alert_id: str) -> Alert | None:
        with self.journal.transaction() as db:
            rows = _select(db, "WHERE id=?", (alert_id,))
        return rows[0] if rows else None

    def active(self) -> list[Alert]:
        """Open and acknowledged alerts, oldest first."""
        with self.journal.transaction() as db:
            return _select(db, "WHERE open_key IS NOT NULL ORDER BY raised_at, id")

    def listing(self, *, include_cleared: bool = False, limit: int = 10_000) -> list[Alert]:
        clause = "" if include_cleared else "WHERE open_key IS NOT NULL "
        with self.journal.transaction() as db:  # the newest ``limit``, oldest first
            newest = _select(db, clause + "ORDER BY raised_at DESC, id DESC LIMIT ?", (limit,))
        return newest[::-1]

    def snapshot(self) -> list[Alert]:
        """What a client's snapshot carries: the active alerts and the last cleared ones."""
        with self.journal.transaction() as db:
            active = _select(db, "WHERE open_key IS NOT NULL ORDER BY raised_at, id")
            cleared = _select(db, "WHERE open_key IS NULL ORDER BY cleared_at DESC LIMIT ?",
                              (CLEARED_IN_SNAPSHOT,))
        return active + cleared[::-1]


def _iso(at: datetime) -> str:
    return (at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)).isoformat()


def _select(db: JournalTx, clause: str, args: Sequence[Any] = ()) -> list[Alert]:
    rows = db.execute(f"SELECT {', '.join(_COLUMNS)} FROM alerts {clause}",
                      tuple(args)).fetchall()
    out = []
    for row in rows:
        d = dict(zip(_COLUMNS, row, strict=True))
        d["run"] = d.pop("run_id")
        d["facts"] = json.loads(d["facts"] or "{}")
        out.append(Alert.model_validate(d))
    return out
