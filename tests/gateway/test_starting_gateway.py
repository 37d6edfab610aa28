"""A gateway that has not read its backends yet does not call an unknown target "not found".

Right after start (or a restart) the gateway's index is empty until each backend's first
successful poll: a decision or action on a run or interrupt it does not know yet answers
``unreachable`` ("the gateway is starting: backends not read yet … retry with the same key"),
retryable (exit 6), never ``not_found``/failed for a decision that may still go through; a
key whose intent is already in the journal (the gateway was killed after writing it) answers
``in_progress``. Once the backend was read, an unknown target is ``not_found`` as before.

Real components: an in-process Gateway with a real DBOS backend on a SQLite system database
that does not exist at first (so its first poll fails and the gateway stays "starting"), its
real SQLite journal, then a real DBOS app launching on that database.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from console.client import GatewayClient
from console.gateway.auth import create_token
from console.gateway.journal_engines import open_journal
from console.gateway.journal_store import Intent
from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings
from console.model import Action, Decision, DecisionKind, Role

APPROVE = Decision(kind=DecisionKind.APPROVE)
UNKNOWN_INTERRUPT = "dbos:local/wf-later/approval-1"
UNKNOWN_RUN = "dbos:local/wf-later"


async def _until(client: GatewayClient, predicate, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met"
        try:
            await asyncio.wait_for(client.updates(), 1)
        except TimeoutError:
            pass


async def test_unknown_targets_before_the_first_poll_are_retryable_not_failed(tmp_path: Path):
    db = tmp_path / "later" / "sys.db"
    token = create_token(Role.OPERATOR, "op", tmp_path)
    settings = GatewaySettings(port=0, home=tmp_path, flush_interval_s=0.02,
                               backends=[f"dbos+sqlite:///{db}?poll=0.2"])
    journal = open_journal(settings.journal_target)  # a previous gateway wrote an intent, died
    journal.begin(Intent(key="k-left", target=UNKNOWN_INTERRUPT, action="approve",
                         identity="op", role="operator", reason="", claim_kind="approve",
                         payload={}))
    journal.close()
    gw = Gateway(settings)
    await gw.start()
    try:
        async with GatewayClient(f"ws://127.0.0.1:{gw.port}", token) as client:
            (decided,) = await client.command(Action.DECIDE, [UNKNOWN_INTERRUPT],
                                              decision=APPROVE, key="k-new")
            assert (decided.error, decided.outcome) == ("unreachable", "failed"), decided
            assert "gateway is starting" in decided.detail and "retry" in decided.detail
            (paused,) = await client.command(Action.PAUSE, [UNKNOWN_RUN], key="k-pause")
            assert paused.error == "unreachable" and "starting" in paused.detail, paused
            (left,) = await client.command(Action.DECIDE, [UNKNOWN_INTERRUPT],
                                           decision=APPROVE, key="k-left")
            assert left.error == "in_progress", left
            assert gw.journal.command("k-new", UNKNOWN_INTERRUPT) is None  # nothing was done

            db.parent.mkdir()
            code = (  # a real DBOS app launching on it creates the system database
                "from dbos import DBOS\n"
                f"DBOS(config={{'name': 'late', 'system_database_url': 'sqlite:///{db}'}})\n"
                "DBOS.launch()\nDBOS.destroy()\n"
            )
            proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code)
            assert await proc.wait() == 0
            await _until(client, lambda: (h := client.view.backends.get("dbos:local"))
                         is not None and h.reachable)
            deadline = time.monotonic() + 10
            while gw.executor.unread and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            (retried,) = await client.command(Action.DECIDE, [UNKNOWN_INTERRUPT],
                                              decision=APPROVE, key="k-new")
            assert (retried.error, retried.outcome) == ("not_found", "failed"), retried
    finally:
        await gw.stop()
