"""When irq's pause mark on a DBOS run may go (the gateway's pause ledger).

An irq pause is a CANCELLED workflow plus irq's record of it: the ``irq.intent=pause``
attribute and the ledger mark. A resume writes ``irq.intent=resume`` *before* it calls
``resume_workflow``, so for a moment the row reads CANCELLED with intent ``resume``, and only
the mark (and, when the pause is a second or more old, the row's own dates:
:func:`mapping.resume_pending`) says that this CANCELLED still means paused. A poll
reads the rows on a pool thread and maps them later on the event loop: when the resume cleared
the mark as it returned, a poll that had read the row in that moment showed the paused run as
cancelled (terminal) for one poll, and ``irq resume --wait`` reported "ended cancelled".

So the mark stays until a poll has read the run after its resume, and goes when either

- the resume applied (``resume_workflow`` returned) before that poll's read began, or
- the poll read the run active under a resume intent it had not seen active before (a resume
  by another gateway on the same journal, or by this one before it restarted).

Once it is gone, a run later cancelled directly through DBOS (its intent still ``resume``) is
shown cancelled, not paused. A clear decided from a read is dropped for a run irq paused again
since that read began: the new pause's mark must stay.
"""

from __future__ import annotations

from collections.abc import Iterable

from dbos import WorkflowStatus

from backend_adapters.base import PauseLedger
from backend_adapters.dbos.conventions import ATTR_INTENT
from backend_adapters.dbos.mapping import BACKEND, attributes_of
from console.model import Run


class PauseEnds:
    """The pause marks of one DBOS context's runs, cleared once a poll read them resumed.

    Event-loop side only; the gateway polls each backend one poll at a time, so one read is
    in progress at most (``read_begins`` .. ``read_done``).
    """

    def __init__(self, ledger: PauseLedger, *, context: str) -> None:
        self._ledger = ledger
        self._context = context
        self._resumed: set[str] = set()  # run ids resumed since the last read began
        self._read_resumed: frozenset[str] = frozenset()  # ... before the current read began
        self._paused: set[str] = set()  # run ids paused since the current read began
        self._seen: dict[str, str] = {}  # workflow id -> resume intent 'at' it was seen active

    def paused(self, run_id: str) -> None:
        """irq paused the run (status CANCELLED, intent pause): mark it."""
        self._paused.add(run_id)
        self._resumed.discard(run_id)
        self._ledger.mark_paused(run_id, True)

    def resumed(self, run_id: str) -> None:
        """``resume_workflow`` returned: the next poll's read sees the run resumed."""
        self._resumed.add(run_id)

    def read_begins(self) -> None:
        # a read that failed (no read_done) hands its resumes on to this one
        self._read_resumed, self._resumed = self._read_resumed | self._resumed, set()
        self._paused = set()

    def read_done(self, active: Iterable[WorkflowStatus]) -> None:
        """Clear the marks that the read (``active``: its active runs) shows are over."""
        ended = set(self._read_resumed)
        seen: dict[str, str] = {}
        for status in active:
            intent = attributes_of(status).get(ATTR_INTENT)
            if not isinstance(intent, dict) or intent.get("action") != "resume":
                continue
            at = str(intent.get("at"))
            seen[status.workflow_id] = at
            if self._seen.get(status.workflow_id) != at:
                ended.add(Run.make_id(BACKEND, self._context, status.workflow_id))
        self._seen = seen
        self._read_resumed = frozenset()
        for run_id in ended - self._paused:
            self._ledger.mark_paused(run_id, False)
