"""Four-eyes approvals on two gateways sharing one PostgreSQL journal (the ``pgserver``
wheel's server): two approvers, each on their own gateway, approving at the same moment an
interrupt that needs two approvals. Counted under the interrupt's advisory lock
(``ApprovalStore.record_unless_last``), exactly one of them is the last approval (and goes on
to the decision claim); the other is recorded. Before, both could count the other's approval
as missing and both be recorded, leaving an interrupt with two approvals and no decision."""

from __future__ import annotations

import threading

from console.gateway.approval_store import ApprovalStore, RecordedCommand
from tests.adapters.postgres_server import postgres_server as postgres_server  # the fixture
from tests.gateway.pg_journals import OpenJournal
from tests.gateway.pg_journals import pg_journal as pg_journal  # the fixture


def _command(key: str) -> object:
    return lambda n: RecordedCommand(key=key, role="operator", reason="", detail=f"{n} of 2")


def test_two_approvers_on_two_gateways_at_once_give_exactly_one_last_approval(
        pg_journal: OpenJournal) -> None:
    stores = [ApprovalStore(pg_journal("gw-a")), ApprovalStore(pg_journal("gw-b"))]
    for round_ in range(20):
        iid = f"dbos:one/wf-{round_}#i1"
        barrier = threading.Barrier(2)
        results: dict[str, object] = {}

        def approve(store: ApprovalStore, who: str, barrier: threading.Barrier = barrier,
                    iid: str = iid, results: dict[str, object] = results) -> None:
            barrier.wait()
            results[who] = store.record_unless_last(
                iid, who, needed=2, kind="approve", args={}, rule="deploys",
                command=_command(f"{who}-{iid}"))  # type: ignore[arg-type]

        threads = [threading.Thread(target=approve, args=(s, w))
                   for s, w in zip(stores, ("alice", "bob"), strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        kinds = sorted("last" if r == "last" else "recorded" for r in results.values())
        assert kinds == ["last", "recorded"], (round_, results)
        assert len(stores[0].approvals(iid)) == 1  # the last one is written with its intent


def test_a_repeat_approval_through_the_other_gateway_is_refused(pg_journal: OpenJournal) -> None:
    a, b = ApprovalStore(pg_journal("gw-a")), ApprovalStore(pg_journal("gw-b"))
    iid = "dbos:one/wf-r#i1"
    first = a.record_unless_last(iid, "alice", needed=3, kind="approve", args={}, rule="r",
                                 command=_command("k1"))  # type: ignore[arg-type]
    assert isinstance(first, RecordedCommand) and first.detail == "1 of 2"
    again = b.record_unless_last(iid, "alice", needed=3, kind="approve", args={}, rule="r",
                                 command=_command("k2"))  # type: ignore[arg-type]
    assert again is None
    second = b.record_unless_last(iid, "bob", needed=3, kind="approve", args={}, rule="r",
                                  command=_command("k3"))  # type: ignore[arg-type]
    assert isinstance(second, RecordedCommand) and second.detail == "2 of 2"
    assert a.record_unless_last(iid, "carol", needed=3, kind="approve", args={}, rule="r",
                                command=_command("k4")) == "last"  # type: ignore[arg-type]
