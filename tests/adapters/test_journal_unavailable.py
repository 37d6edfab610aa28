"""The shared journal's PostgreSQL goes down while an operator decides: the decision gets a
clear, retryable answer (error ``unreachable``, exit 6 in the CLI: "the gateway's journal is
unavailable … retry with the same idempotency key"), never the database's raw message nor
the journal URL's credentials; the gateway stays up and reconnects, and the same key re-sent
once the server is back reaches the agent exactly once.

Real components: a real ``irq serve`` process, a real DBOS agent, a real PostgreSQL server
(devtools/chaos/fleet.py ``JournalPostgres``, the pgserver wheel's binaries), as in
devtools/chaos/freeze.py ``run_postgres_restart``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from pathlib import Path

import pytest

from console.client import GatewayClient, GatewayError
from console.model import Action, Decision, DecisionKind
from devtools.chaos.fleet import (
    DBOSWorkerProcess,
    GatewayProcess,
    JournalPostgres,
    approval_plan,
    make_tokens,
)
from devtools.chaos.freeze import _decide_once, _until
from devtools.dbos_record import settled_record


@pytest.mark.timeout(300)
async def test_a_decision_while_the_journal_is_down_is_unreachable_then_applied_once(
        tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        pg = JournalPostgres()
        pg.start()
        stack.callback(pg.stop)
        home = tmp_path / "home"
        tokens = make_tokens(home, clients=1, scopes=["dbos:local"])
        dbos = DBOSWorkerProcess(tmp_path / "dbos", executor_id="ju-w1")
        gw = GatewayProcess(home, [dbos.backend_url], name="ju-gw", journal=pg.url)
        gw.start()
        stack.callback(gw.stop)
        dbos.start()
        stack.callback(dbos.stop)
        wid = f"ju-{uuid.uuid4().hex[:6]}"
        await asyncio.to_thread(dbos.enqueue, [(wid, approval_plan(1))])
        token = tokens["operator"][0]
        key = f"ju-{uuid.uuid4().hex}"
        async with GatewayClient(gw.url, token, open_timeout=10) as client:
            assert await _until(lambda: any(i.run_id.endswith("/" + wid)
                                            for i in client.view.pending_interrupts()),
                                client, 60) is not None
            iid = next(i.id for i in client.view.pending_interrupts()
                       if i.run_id.endswith("/" + wid))
            await asyncio.to_thread(pg.shutdown)
            for attempt in range(2):  # the broken connection, then a failed reconnect
                with pytest.raises(GatewayError) as raised:
                    await asyncio.wait_for(client.command(
                        Action.DECIDE, [iid], key=key,
                        decision=Decision(kind=DecisionKind.APPROVE)), 30)
                error = raised.value
                assert error.code == "unreachable", (attempt, error.code, error.message)
                assert "journal is unavailable" in error.message, error.message
                assert "same idempotency key" in error.message, error.message
                for raw in ("AdminShutdown", "terminating connection", "psycopg",
                            "postgresql://", "OperationalError"):
                    assert raw not in error.message, error.message
            # the gateway polls on meanwhile, the journal asked about interrupts each time:
            # wait for two such polls in its log, not for a fixed time
            def polls_while_down() -> int:
                return gw.log.read_text().count("reading dbos:local's interrupts:")

            seen, began = polls_while_down(), time.monotonic()
            while polls_while_down() < seen + 2:
                assert time.monotonic() - began < 60, gw.log.read_text()[-2000:]
                await asyncio.sleep(0.1)
        await asyncio.to_thread(pg._postmaster)
        assert gw.alive(), gw.log.read_text()[-2000:]
        assert await _decide_once(gw, token, iid, key) == "applied"
        assert await _decide_once(gw, token, iid, key) == "applied"  # replayed, not re-sent
        later = f"ju-{uuid.uuid4().hex[:6]}"  # the backend is still polled: new work shows
        await asyncio.to_thread(dbos.enqueue, [(later, approval_plan(1))])
        async with GatewayClient(gw.url, token, open_timeout=10) as client:
            assert await _until(lambda: any(i.run_id.endswith("/" + later)
                                            for i in client.view.pending_interrupts()),
                                client, 30) is not None, gw.log.read_text()[-2000:]
        record = await settled_record(dbos.db, wid, timeout_s=60)
        sent = [m for m in record.sent if isinstance(m["message"], dict)]
        assert len(sent) == 1, record.sent
