"""The bookkeeping every operator command shares: its journal row, replay and re-drive, the
audit of refusals, the outcome settled with its audit entry, and the backend call's errors as
results.

A command is a straight line over the journal (journal_store.py): checks on the hub's state,
``begin`` (replay, or intent + decision claim in one transaction), the backend call, ``settle``
(outcome + claim + audit in one transaction). A refusal before ``begin`` is only audited.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from backend_adapters.base import BackendError
from console.gateway.auth import Principal
from console.gateway.hub import Hub
from console.gateway.journal_store import AlsoWrite, CommandRow, JournalStore, Settlement
from console.gateway.protocol import Command
from console.gateway.refusals import RefusalLedger
from console.model import ActionPlan, AuditEntry, CommandResult, Outcome, utcnow

BACKEND_CALL_TIMEOUT_S = 30.0

#: what an adapter call answers (an ActionOutcome; a RetryOutcome for retry)
T = TypeVar("T")

_ERROR_OUTCOME: dict[str, Outcome] = {"conflict": "conflict", "forbidden": "forbidden"}


@dataclass
class Attempt:
    """One command on one target: what its results and journal rows are made of."""

    key: str  # the client's idempotency key
    action: str  # the run action or the decision kind
    target: str
    who: Principal
    reason: str
    dry_run: bool = False
    #: the journal's row under this key, when a crash left its intent (re-driven)
    row: CommandRow | None = None
    plan: ActionPlan | None = None

    @staticmethod
    def of(cmd: Command, who: Principal, target: str, action: str) -> Attempt:
        return Attempt(cmd.id, action, target, who, cmd.reason, cmd.dry_run)

    def result(self, outcome: Outcome, *, error: str | None = None,
               detail: str = "") -> CommandResult:
        return CommandResult(id=self.key, action=self.action, target=self.target,
                             outcome=outcome, error=error, detail=detail, plan=self.plan)


class CommandBook:
    def __init__(self, hub: Hub, journal: JournalStore, *,
                 refusals: RefusalLedger | None = None,
                 unread: set[str] | None = None,
                 fault_hook: Callable[[str], None] | None = None) -> None:
        self.hub = hub
        self.journal = journal
        #: refused commands are audited in summary (refusals.py); None: one entry each
        self.refusals = refusals
        #: backends (``backend:context``) not read once yet since this gateway started (the
        #: gateway fills it and empties it as each first poll succeeds): until then an unknown
        #: run or interrupt may just not be read yet, so it is not answered ``not_found``
        self.unread: set[str] = unread if unread is not None else set()
        #: test-only seam, called at named points of a command (``after_intent``); only the
        #: crash-safety tests set it (tests/support/faulty_gateway.py), never shipped code
        self.fault_hook = fault_hook
        self.inflight: set[tuple[str, str]] = set()

    # -------------------------------------------------------------- the journal's row

    def open(self, cmd: Command, who: Principal, target: str, action: str
             ) -> Attempt | CommandResult:
        """The attempt at ``target``, or the result already given under the command's key
        (a retry; an intent still running)."""
        attempt = Attempt.of(cmd, who, target, action)
        attempt.row = None if cmd.dry_run else self.journal.command(cmd.id, target)
        if attempt.row is not None and not self.redrive(attempt.row):
            return self.replayed(attempt.row)
        return attempt

    def redrive(self, row: CommandRow) -> bool:
        """Whether a retry under a known key re-drives it: only an intent a crash left (not
        one this gateway is executing right now, nor one a live peer gateway owns)."""
        return (row.status == "intent" and (row.key, row.target) not in self.inflight
                and self.journal.adopt(row))

    def replayed(self, row: CommandRow) -> CommandResult:
        plan = ActionPlan.model_validate(row.plan) if row.plan else None
        if row.status == "intent":  # the first copy of this command is still running
            return CommandResult(
                id=row.key, action=row.action, target=row.target, outcome="conflict",
                error="in_progress", plan=plan, replayed=True,
                detail="the same command (same key) is still in progress; ask again for its result",
            )
        return CommandResult(
            id=row.key, action=row.action, target=row.target,
            outcome=row.status,  # type: ignore[arg-type]
            error=row.error, detail=row.detail or "already executed under this key",
            plan=plan, replayed=True, new_run_id=row.new_run_id,
        )

    def not_found(self, attempt: Attempt, what: str) -> CommandResult:
        """The answer for a target this gateway does not know: ``in_progress`` when its key
        already has an intent in the journal (a crash left it; it is re-driven once the
        backends are read), ``unreachable`` while some backend has not been read since start
        (nothing was done; retry with the same key), else ``not_found`` (audited)."""
        row = attempt.row
        if row is not None and row.status == "intent":
            return self.replayed(row)
        if self.unread:
            return attempt.result(
                "failed", error="unreachable",
                detail="the gateway is starting: backends not read yet "
                f"({', '.join(sorted(self.unread))}); nothing was done; retry with the same key")
        return self.refuse(attempt, "failed", "not_found", f"no such {what}: {attempt.target}")

    # ------------------------------------------------------------------- the outcome

    def refuse(self, attempt: Attempt, outcome: Outcome, error: str,
               detail: str) -> CommandResult:
        """A refusal before any intent: audited only."""
        return self.audited(attempt, attempt.result(outcome, error=error, detail=detail))

    def audited(self, attempt: Attempt, result: CommandResult) -> CommandResult:
        """A result reached without an intent of its own (a refusal, a recorded approval)."""
        self.audit(attempt.who, result, attempt.reason)
        return result

    def settle(self, who: Principal, reason: str, result: CommandResult, *,
               claimed: bool = False, also: AlsoWrite | None = None) -> None:
        """The journaled command's outcome, its decision claim and its audit entry, in one
        transaction; then what the hub shows."""
        entry = _audit_entry(who, result, reason)
        claim = self.journal.settle(Settlement(
            key=result.id, target=result.target, outcome=result.outcome, detail=result.detail,
            error=result.error, audit=entry, claimed=claimed, new_run_id=result.new_run_id),
            also=also)
        if claimed and result.outcome == "applied" and claim is not None:
            self.hub.mark_decided(result.target, claim)
        self.hub.publish("audit", entry.contract())

    def audit(self, who: Principal, result: CommandResult, reason: str) -> None:
        entry = _audit_entry(who, result, reason)
        self.journal.audit(entry)
        self.hub.publish("audit", entry.contract())

    # -------------------------------------------------------------- the backend call

    @contextlib.contextmanager
    def in_flight(self, key: str, target: str) -> Iterator[None]:
        """The backend call under ``key`` is running here: recovery never re-drives it (the
        caller settles with no await after the call returns)."""
        self.inflight.add((key, target))
        try:
            yield
        finally:
            self.inflight.discard((key, target))

    async def call(self, attempt: Attempt, call: Coroutine[Any, Any, T],
                   backend_name: str) -> CommandResult | T:
        """The adapter's answer, or its failure as a result (an adapter bug must not take the
        gateway down)."""
        try:
            return await asyncio.wait_for(call, BACKEND_CALL_TIMEOUT_S)
        except BackendError as exc:
            return attempt.result(_ERROR_OUTCOME.get(exc.code, "failed"), error=exc.code,
                                  detail=exc.message)
        except TimeoutError:
            return attempt.result("failed", error="unreachable",
                                  detail=f"{backend_name} did not answer in "
                                  f"{BACKEND_CALL_TIMEOUT_S:g}s")
        except Exception as exc:
            return attempt.result("failed", error="internal",
                                  detail=f"{type(exc).__name__}: {exc}")

    def crash_point(self, name: str) -> None:
        """A named point where a test's fault hook may act (e.g. SIGKILL the gateway)."""
        if self.fault_hook is not None:
            self.fault_hook(name)

    def redriven(self, row: CommandRow) -> str:
        """How the audit says who re-drove a command (``row`` as read before adoption)."""
        if not row.owner or row.owner == self.journal.owner:
            return "re-driven after a gateway restart"
        return f"re-driven by gateway {self.journal.owner} for gateway {row.owner}, which stopped"


def _audit_entry(who: Principal, result: CommandResult, reason: str) -> AuditEntry:
    return AuditEntry(
        at=utcnow(), identity=who.identity, role=who.role.value, action=result.action,
        target=result.target, reason=reason, outcome=result.outcome,
        plan=result.plan.contract() if result.plan else None, command_id=result.id,
        detail=result.detail,
    )
