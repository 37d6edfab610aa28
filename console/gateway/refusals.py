"""Refusals, audited in summary: one identity cannot flood the audit trail or the log.

The first refusal of an identity in an interval is audited (and logged) at once, in full;
the ones that follow in the same interval are only counted, and one summary entry per
identity closes the interval ("and 49 more refused ... in 60 s: forbidden x49; e.g. ...").
So a viewer's 50 refused cancels of 1,000 targets write two audit rows, not 50,000, and an
agent's flood of out-of-scope beats writes two rows a minute.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from console.model import AuditEntry, utcnow

log = logging.getLogger("irq.gateway.refusals")

MAX_EXAMPLES = 3
MAX_IDENTITIES = 10_000  # open windows; beyond that the oldest is summarised early


@dataclass
class _Window:
    identity: str
    role: str
    started: float
    count: int = 0  # refusals after the first
    items: int = 0  # targets (commands) or beats
    codes: Counter[str] = field(default_factory=Counter)
    actions: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)


class RefusalLedger:
    def __init__(self, audit: Callable[[AuditEntry], None], *, interval_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._audit = audit
        self.interval_s = interval_s
        self.clock = clock
        self._windows: dict[str, _Window] = {}
        self.total: Counter[str] = Counter()  # refusals by code since start (stats query)
        self.audited = 0  # audit rows written by this ledger

    def refuse(self, *, identity: str, role: str, action: str, target: str, code: str,
               detail: str, reason: str = "", items: int = 1, command_id: str = "") -> None:
        """Record one refusal (of ``items`` targets/beats)."""
        self.total[code] += items
        now = self.clock()
        window = self._windows.get(identity)
        if window is not None and now - window.started >= self.interval_s:
            self._close(window)
            window = None
        if window is None:
            if len(self._windows) >= MAX_IDENTITIES:
                self._close(min(self._windows.values(), key=lambda w: w.started))
            self._windows[identity] = _Window(identity, role, now)
            log.warning("refused %s by %s (%s) on %s: %s: %s", action, identity, role,
                        target, code, detail)
            self._write(AuditEntry(at=utcnow(), identity=identity, role=role, action=action,
                                   target=target, reason=reason, outcome=_outcome(code),
                                   command_id=command_id, detail=f"{code}: {detail}"))
            return
        window.count += 1
        window.items += items
        window.codes[code] += 1
        window.actions[action] += 1
        if target and len(window.examples) < MAX_EXAMPLES and target not in window.examples:
            window.examples.append(target)

    def flush(self, *, force: bool = False) -> None:
        """Close the windows whose interval is over (all of them with ``force``)."""
        now = self.clock()
        for window in list(self._windows.values()):
            if force or now - window.started >= self.interval_s:
                self._close(window)

    def _close(self, window: _Window) -> None:
        self._windows.pop(window.identity, None)
        if not window.count:
            return
        seconds = max(1, round(self.clock() - window.started))
        codes = ", ".join(f"{c} x{n}" for c, n in window.codes.most_common())
        actions = ", ".join(f"{a} x{n}" for a, n in window.actions.most_common())
        examples = [e for e in window.examples if e]
        detail = (f"and {window.count} more refused ({actions}; {window.items} targets or "
                  f"beats) in {seconds} s: {codes}"
                  + (f"; e.g. {', '.join(examples)}" if examples else ""))
        log.warning("%s (%s): %s", window.identity, window.role, detail)
        self._write(AuditEntry(
            at=utcnow(), identity=window.identity, role=window.role,
            action=window.actions.most_common(1)[0][0], target=window.examples[0] if
            window.examples else "", outcome="refused", detail=detail))

    def _write(self, entry: AuditEntry) -> None:
        self.audited += 1
        self._audit(entry)


def _outcome(code: str) -> str:
    return "forbidden" if code == "forbidden" else "refused"
