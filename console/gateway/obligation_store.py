"""Obligations and agents' policy decisions, in the gateway's journal (the same database and
connection as the journal's own tables, SQLite or PostgreSQL: journal_store.py), so they
survive a restart and stay owner-only.

Obligations are inserted idempotently by id (an agent's replay re-sends the same id; nothing
is duplicated and no state goes back). ``open`` becomes ``overdue`` when ``due_at`` passes
(:meth:`ObligationStore.mark_overdue`, called every second by the gateway); ``fulfilled`` and
``waived`` are final. Policy decisions reported by agents are kept, the last
:data:`DECISIONS_PER_RUN` per run, idempotent by (run, call id, tool).

Operator commands on obligations are written in the same transaction as the change they make
(the ``commands`` row gets its final outcome at once, never an ``intent``), so a crash can
neither leave one half done nor leave an intent for the run-action recovery to trip over.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from console.gateway.journal_store import JournalStore, JournalTx
from console.policy.model import Obligation, ObligationState, PolicyDecision

DECISIONS_PER_RUN = 200  # policy decisions kept per run
CLOSED_IN_SNAPSHOT = 200  # fulfilled/waived obligations a snapshot carries (newest first)
OUTSTANDING: tuple[ObligationState, ...] = ("open", "overdue")

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS obligations (
    id TEXT PRIMARY KEY,
    rule TEXT NOT NULL,
    run_id TEXT NOT NULL,
    what TEXT NOT NULL,
    created_at TEXT NOT NULL,
    due_at TEXT,
    due_ts {float},                      -- due_at as epoch seconds, for the overdue scan
    state TEXT NOT NULL,              -- open | overdue | fulfilled | waived
    by TEXT NOT NULL DEFAULT '',
    note TEXT NOT NULL DEFAULT '',
    tool TEXT NOT NULL DEFAULT '',
    policy_version TEXT,
    closed_at TEXT
)""",
    "CREATE INDEX IF NOT EXISTS obligations_state_due ON obligations(state, due_ts)",
    "CREATE INDEX IF NOT EXISTS obligations_run ON obligations(run_id)",
    """CREATE TABLE IF NOT EXISTS policy_decisions (
    seq {serial_key},
    run_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    at TEXT NOT NULL,
    tool TEXT NOT NULL,
    outcome TEXT NOT NULL,
    winner TEXT,
    policy_version TEXT,
    decision_json TEXT NOT NULL,
    UNIQUE (run_id, call_id, tool)
)""",
    "CREATE INDEX IF NOT EXISTS policy_decisions_run ON policy_decisions(run_id, seq)",
)

_COLUMNS = ("id", "rule", "run_id", "what", "created_at", "due_at", "state", "by", "note",
            "tool", "policy_version")


@dataclass(frozen=True)
class Closing:
    """What an operator command on one obligation came to."""

    outcome: str  # applied | conflict | failed
    error: str | None
    detail: str
    obligation: Obligation | None


class ObligationStore:
    def __init__(self, journal: JournalStore) -> None:
        self.journal = journal
        journal.create_tables(_SCHEMA)

    # ---------------------------------------------------------------------- obligations

    def add(self, obligation: Obligation) -> Obligation | None:
        """Insert; the stored obligation when it is new, None when the id was known."""
        ob = _normal(obligation)
        closed = ob.created_at.isoformat() if ob.state in ("fulfilled", "waived") else None
        with self.journal.transaction() as db:
            cur = db.execute(
                "INSERT INTO obligations (id, rule, run_id, what, created_at, due_at,"
                " due_ts, state, by, note, tool, policy_version, closed_at)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (id) DO NOTHING",
                (ob.id, ob.rule, ob.run_id, ob.what, ob.created_at.isoformat(),
                 ob.due_at.isoformat() if ob.due_at else None,
                 ob.due_at.timestamp() if ob.due_at else None, ob.state, ob.by, ob.note,
                 ob.tool, ob.policy_version, closed))
        return ob if cur.rowcount == 1 else None

    def get(self, obligation_id: str) -> Obligation | None:
        with self.journal.transaction() as db:
            rows = _select(db, "WHERE id=?", (obligation_id,))
        return rows[0] if rows else None

    def fulfil_by_agent(self, obligation_id: str, by: str, note: str,
                        at: datetime) -> Obligation | None:
        """Fulfilled by the run's agent; the obligation when this changed it, else None
        (already fulfilled or waived: a replayed frame)."""
        with self.journal.transaction() as db:
            changed = _close(db, obligation_id, "fulfilled", by, note, at)
            return _select(db, "WHERE id=?", (obligation_id,))[0] if changed else None

    def close_by_operator(self, obligation_id: str, state: ObligationState, *, by: str,
                          note: str, at: datetime, command: dict[str, Any]) -> Closing:
        """Fulfil or waive for an operator and write the command's row with its outcome in
        the same transaction. ``command``: key, action, identity, role (journal.py columns)."""
        with self.journal.transaction() as db:
            found = _select(db, "WHERE id=?", (obligation_id,))
            if not found:
                result = Closing("failed", "not_found", f"no such obligation: {obligation_id}",
                                 None)
            elif found[0].state not in OUTSTANDING:
                ob = found[0]
                result = Closing("conflict", "conflict",
                                 f"obligation is already {ob.state}"
                                 + (f" by {ob.by}" if ob.by else ""), ob)
            else:
                _close(db, obligation_id, state, by, note, at)
                ob = _select(db, "WHERE id=?", (obligation_id,))[0]
                verb = "fulfilled" if state == "fulfilled" else "waived"
                result = Closing("applied", None, f"{obligation_id} {verb} by {by}", ob)
            record_command(db, target=obligation_id, reason=note, outcome=result.outcome,
                           error=result.error, detail=result.detail, at=at, **command)
        return result

    def mark_overdue(self, now: datetime) -> list[Obligation]:
        """Open obligations whose due time has passed become overdue; those are returned."""
        with self.journal.transaction() as db:  # one statement: on a journal shared by
            # several gateways each obligation turns overdue (and is returned) exactly once
            rows = db.execute(
                "UPDATE obligations SET state='overdue' WHERE state='open' AND due_ts IS NOT"
                f" NULL AND due_ts <= ? RETURNING {', '.join(_COLUMNS)}",
                (now.timestamp(),)).fetchall()
        return [Obligation.model_validate(dict(zip(_COLUMNS, row, strict=True)))
                for row in rows]

    def listing(self, *, state: ObligationState | None = None, run_id: str | None = None,
                limit: int = 10_000) -> list[Obligation]:
        where: list[str] = []
        args: list[Any] = []
        if state is not None:
            where.append("state=?")
            args.append(state)
        if run_id:
            where.append("run_id=?")
            args.append(run_id)
        clause = ("WHERE " + " AND ".join(where)) if where else ""
        with self.journal.transaction() as db:  # the newest ``limit``, oldest first
            newest = _select(db, clause + " ORDER BY created_at DESC, id DESC LIMIT ?",
                             (*args, limit))
        return newest[::-1]

    def snapshot(self) -> list[Obligation]:
        """Open and overdue obligations, and the last closed ones."""
        with self.journal.transaction() as db:
            outstanding = _select(db, "WHERE state IN ('open', 'overdue') ORDER BY created_at")
            closed = _select(db, "WHERE state IN ('fulfilled', 'waived')"
                             " ORDER BY closed_at DESC LIMIT ?", (CLOSED_IN_SNAPSHOT,))
        return outstanding + closed

    # ------------------------------------------------------------------------ decisions

    def add_decision(self, run_id: str, call_id: str, tool: str, at: datetime,
                     decision: PolicyDecision) -> bool:
        """Keep an agent's decision; False when (run, call id, tool) was already recorded."""
        with self.journal.transaction() as db:
            cur = db.execute(
                "INSERT INTO policy_decisions (run_id, call_id, at, tool, outcome,"
                " winner, policy_version, decision_json) VALUES (?,?,?,?,?,?,?,?)"
                " ON CONFLICT (run_id, call_id, tool) DO NOTHING",
                (run_id, call_id, _utc(at).isoformat(), tool, decision.outcome,
                 decision.winner, decision.policy_version,
                 json.dumps(decision.model_dump(mode="json"))))
            if cur.rowcount != 1:
                return False
            db.execute(
                "DELETE FROM policy_decisions WHERE run_id=? AND seq NOT IN (SELECT seq FROM"
                " policy_decisions WHERE run_id=? ORDER BY seq DESC LIMIT ?)",
                (run_id, run_id, DECISIONS_PER_RUN))
        return True

    def decisions(self, run_id: str) -> list[dict[str, Any]]:
        """The run's kept decisions, oldest first, as the ``run`` query shows them."""
        with self.journal.transaction() as db:
            rows = db.execute(
                "SELECT at, call_id, tool, outcome, winner, policy_version, decision_json FROM"
                " policy_decisions WHERE run_id=? ORDER BY seq", (run_id,)).fetchall()
        out = []
        for at, call_id, tool, outcome, winner, version, raw in rows:
            decision = json.loads(raw)
            out.append({"at": at, "call_id": call_id, "tool": tool, "outcome": outcome,
                        "winner": winner, "rules": decision.get("rules", []),
                        "policy_version": version,
                        "explanation": decision.get("explanation", [])})
        return out


def record_command(db: JournalTx, *, key: str, target: str, action: str, identity: str,
                   role: str, reason: str, outcome: str, error: str | None, detail: str,
                   at: datetime) -> None:
    """A command row (journal.py ``commands``) written with its final outcome."""
    db.execute(
        "INSERT INTO commands (key, target, action, identity, role, reason, payload,"
        " plan, status, error, detail, created_at, finished_at)"
        " VALUES (?,?,?,?,?,?, '{}', NULL, ?,?,?,?,?) ON CONFLICT (key, target) DO NOTHING",
        (key, target, action, identity, role, reason, outcome, error, detail, at.isoformat(),
         at.isoformat()))


def _close(db: JournalTx, obligation_id: str, state: str, by: str, note: str,
           at: datetime) -> bool:
    cur = db.execute(
        "UPDATE obligations SET state=?, by=?, note=?, closed_at=? WHERE id=? AND"
        " state IN ('open', 'overdue')", (state, by, note, at.isoformat(), obligation_id))
    return cur.rowcount == 1


def _select(db: JournalTx, clause: str, args: tuple[Any, ...] = ()) -> list[Obligation]:
    rows = db.execute(f"SELECT {', '.join(_COLUMNS)} FROM obligations {clause}", args).fetchall()
    return [Obligation.model_validate(dict(zip(_COLUMNS, row, strict=True))) for row in rows]


def _utc(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def _normal(ob: Obligation) -> Obligation:
    """Times in UTC (a naive time is taken as UTC)."""
    return ob.model_copy(update={"created_at": _utc(ob.created_at),
                                 "due_at": _utc(ob.due_at) if ob.due_at else None})
