"""``irq runs``' answer (``query what=runs``) encoded from the runs' cached contracts.

The listing was built as 10,000 ``contract()`` dicts encoded again for each call (0.18 s of a
0.64 s ``irq runs -o json`` at 10,000 runs). Each run's contract is already encoded and cached
between snapshots and events (run_contracts.py), its fields that move with the clock or the
beats last; the answer is those fragments joined, with ``fields``: the contract's own key
order, for a client that prints the runs as the contract lays them out (the CLI's ``-o json``
stays the same document).
"""

from __future__ import annotations

from datetime import datetime

from console.gateway.hub import Hub
from console.gateway.protocol import Query, encode
from console.run_filter import listed_runs


def listing_frame(hub: Hub, q: Query, now: datetime) -> bytes:
    """The ``answer`` frame to ``q``: ``{"seq", "runs", "backends", "fields"}``, each run the
    value ``run.contract(now)`` has, in the encoded order of the contract cache."""
    runs = listed_runs(hub.runs.values(), q.states or (), q.backend, q.expr, now)
    head = encode({
        "type": "answer", "id": q.id,
        "data": {"seq": hub.seq,
                 "fields": list(runs[0].contract(now)) if runs else [],
                 "backends": [b.contract(now) for b in hub.backends.values()],
                 "runs": []},
    })
    at = head.rindex(b'"runs":[]') + len(b'"runs":[')
    body = b",".join([hub.contract_bytes(r, now) for r in runs])
    return b"".join((head[:at], body, head[at:]))
