"""SIGSTOP instead of SIGKILL: a process that hangs with its sockets open.

- **A backend frozen and resumed**: the Temporal dev server is SIGSTOPped while an operator
  decides; clients are told (the backend's health event: ``reachable: false``), the decision
  sent meanwhile is re-sent with its key after the thaw, and the agent receives each decision
  exactly once (its workflow result).
- **A gateway frozen while agents push**: the gateway that DBOS agents push heartbeats to is
  SIGSTOPped past the websockets keepalive timeout, then resumed; the agents reconnect (their
  runs report fresh beats again) and a decision an operator sent while it was frozen (its
  frame waiting in the frozen gateway's socket, or re-sent with its key after the thaw when
  the connection did not survive) reaches its agent once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from console.client import GatewayClient, GatewayError
from console.model import Action, Decision, DecisionKind
from devtools.chaos.fleet import (
    DBOSWorkerProcess,
    GatewayProcess,
    approval_plan,
    idle_plan,
    make_tokens,
)


@dataclass
class FreezeReport:
    backend_frozen_s: float = 0.0
    unreachable_seen_after_s: float | None = None  # clients told the backend is down
    reachable_again_after_s: float | None = None  # after the thaw
    decision_during_freeze: str = ""  # outcome/error of the first send while frozen
    backend_freeze_lost: int = 0
    backend_freeze_doubled: int = 0
    gateway_frozen_s: float = 0.0
    agents_back_after_s: float | None = None  # fresh beats from every agent after the thaw
    decision_during_gateway_freeze: str = ""  # outcome/error of the send while frozen
    gateway_freeze_lost: int = 0
    gateway_freeze_doubled: int = 0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 1)

        return {
            "backend_frozen_s": r(self.backend_frozen_s),
            "backend_unreachable_seen_after_s": r(self.unreachable_seen_after_s),
            "backend_reachable_again_after_s": r(self.reachable_again_after_s),
            "decision_during_backend_freeze": self.decision_during_freeze,
            "backend_freeze_lost": self.backend_freeze_lost,
            "backend_freeze_doubled": self.backend_freeze_doubled,
            "gateway_frozen_s": r(self.gateway_frozen_s),
            "agents_back_after_s": r(self.agents_back_after_s),
            "decision_during_gateway_freeze": self.decision_during_gateway_freeze,
            "gateway_freeze_lost": self.gateway_freeze_lost,
            "gateway_freeze_doubled": self.gateway_freeze_doubled,
            "freeze_notes": self.notes,
        }


async def _until(predicate: Any, client: GatewayClient, timeout_s: float) -> float | None:
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        if predicate():
            return time.monotonic() - began
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(client.updates(), 0.5)
    return None


async def _decide_once(gw: GatewayProcess, token: str, iid: str, key: str,
                       timeout_s: float = 120) -> str:
    """Send the decision, re-sending it with the same key until it has an outcome."""
    began = time.monotonic()
    last = "no answer"
    while time.monotonic() - began < timeout_s:
        try:
            async with GatewayClient(gw.url, token, subscribe=False, open_timeout=5,
                                     request_timeout=30) as client:
                res = (await client.command(Action.DECIDE, [iid], key=key,
                                            decision=Decision(kind=DecisionKind.APPROVE)))[0]
        except GatewayError as exc:
            last = f"unreachable: {exc}"
            await asyncio.sleep(0.5)
            continue
        last = f"{res.outcome}/{res.error}" if res.error else res.outcome
        if res.error in ("in_progress", "not_found", "unreachable"):
            await asyncio.sleep(0.5)
            continue
        return last
    return last


async def run_backend_freeze(workdir: Path, *, freeze_s: float = 15.0) -> FreezeReport:
    from backend_adapters.temporal.dev_server import DevServer
    from devtools.temporal_sample_worker import WorkerProcess

    report = FreezeReport()
    with contextlib.ExitStack() as stack:
        temporal = DevServer(workdir / "temporal-frozen")
        temporal.start()
        stack.callback(temporal.stop)
        queue = f"freeze-{uuid.uuid4().hex[:6]}"
        worker = WorkerProcess(address=temporal.address, task_queue=queue, identity="freeze-w",
                               log_path=workdir / "freeze-worker.log")
        worker.start()
        stack.callback(worker.stop)
        home = workdir / "freeze-home"
        tokens = make_tokens(home, clients=1)
        gw = GatewayProcess(home, [temporal.backend_url(rps=50, query=f"TaskQueue='{queue}'",
                                                        timeout=3, poll=0.5)], name="freeze-gw")
        gw.start()
        stack.callback(gw.stop)
        wid = f"freeze-{uuid.uuid4().hex[:8]}"
        temporal.start_workflow(wid, "ApprovalAgent", queue, {
            "interrupts": [{"title": f"freeze {n}", "id": f"i{n}", "allowed": ["approve"]}
                           for n in (1, 2)], "linger_s": 1})
        token = tokens["operator"][0]
        async with GatewayClient(gw.url, token, open_timeout=10) as client:
            def pending(native: str) -> str | None:
                return next((i.id for i in client.view.pending_interrupts()
                             if i.run_id.endswith("/" + wid) and i.native_id == native), None)

            def health() -> bool | None:
                found = [b.reachable for b in client.view.backends.values()
                         if b.backend == "temporal"]
                return found[0] if found else None

            await _until(lambda: pending("i1"), client, 60)
            iid = pending("i1")
            assert iid is not None, "no pending interrupt before the freeze"
            temporal.freeze()
            frozen_at = time.monotonic()
            key = f"freeze-{uuid.uuid4().hex}"

            async def decide_while_frozen() -> None:
                try:
                    res = (await asyncio.wait_for(client.command(
                        Action.DECIDE, [iid], key=key,
                        decision=Decision(kind=DecisionKind.APPROVE)), freeze_s))[0]
                    report.decision_during_freeze = f"{res.outcome}/{res.error}"
                except (TimeoutError, GatewayError) as exc:
                    report.decision_during_freeze = (
                        f"no answer while frozen ({type(exc).__name__})")

            try:
                sending = asyncio.create_task(decide_while_frozen())
                report.unreachable_seen_after_s = await _until(
                    lambda: health() is False, client, freeze_s)
                await sending
                await asyncio.sleep(max(0.0, freeze_s - (time.monotonic() - frozen_at)))
            finally:
                temporal.thaw()
                report.backend_frozen_s = time.monotonic() - frozen_at
            report.reachable_again_after_s = await _until(lambda: health() is True, client, 60)
        # the same key again after the thaw (a failed answer was not journaled as applied:
        # an operator's retry), then the second interrupt
        report.notes.append(f"i1 after thaw: {await _decide_once(gw, token, iid, key)}")
        async with GatewayClient(gw.url, token, open_timeout=10) as client:
            await _until(lambda: any(i.native_id == "i2" and i.run_id.endswith("/" + wid)
                                     for i in client.view.pending_interrupts()), client, 60)
            i2 = next((i.id for i in client.view.pending_interrupts()
                       if i.native_id == "i2" and i.run_id.endswith("/" + wid)), None)
        if i2 is not None:
            report.notes.append(f"i2: {await _decide_once(gw, token, i2, uuid.uuid4().hex)}")
        close = await asyncio.to_thread(temporal.result, wid, 60)
        delivered = close["workflowExecutionCompletedEventAttributes"]["result"][0]["delivered"]
        ids = [d["interrupt_id"] for d in delivered]
        report.backend_freeze_lost = sum(1 for n in ("i1", "i2") if n not in ids)
        report.backend_freeze_doubled = sum(1 for n in set(ids) if ids.count(n) > 1)
    return report


async def run_gateway_freeze(workdir: Path, report: FreezeReport, *,
                             freeze_s: float = 25.0) -> FreezeReport:
    from devtools.dbos_record import settled_record

    with contextlib.ExitStack() as stack:
        home = workdir / "gwfreeze-home"
        tokens = make_tokens(home, clients=1, scopes=["dbos:local"])
        dbos = DBOSWorkerProcess(workdir / "gwfreeze-dbos", executor_id="freeze-w1")
        gw = GatewayProcess(home, [dbos.backend_url], name="gwfreeze-gw")
        gw.start()
        stack.callback(gw.stop)
        dbos.agent_url, dbos.agent_token = gw.agent_url, tokens["agent"][0]
        dbos.start()
        stack.callback(dbos.stop)
        busy = [f"busy-{n}-{uuid.uuid4().hex[:6]}" for n in range(2)]
        asker = f"ask-{uuid.uuid4().hex[:6]}"
        await asyncio.to_thread(dbos.enqueue, [(w, idle_plan(freeze_s + 60)) for w in busy]
                                + [(asker, approval_plan(1))])
        token = tokens["operator"][0]

        def beating(client: GatewayClient, since: datetime) -> bool:
            runs = [client.view.runs.get(f"dbos:local/{w}") for w in busy]
            return all(r is not None and r.heartbeat_at is not None and r.heartbeat_at > since
                       for r in runs)

        async with GatewayClient(gw.url, token, open_timeout=10) as client:
            start = datetime.now(UTC)
            await _until(lambda: beating(client, start), client, 60)
            await _until(lambda: any(i.run_id.endswith("/" + asker)
                                     for i in client.view.pending_interrupts()), client, 60)
            iid = next((i.id for i in client.view.pending_interrupts()
                        if i.run_id.endswith("/" + asker)), None)
        if iid is None:
            report.notes.append("no pending interrupt before the gateway freeze")
            report.gateway_freeze_lost += 1
            return report
        key = f"gwfreeze-{uuid.uuid4().hex}"
        deciding = await GatewayClient(gw.url, token, subscribe=False, open_timeout=10,
                                       request_timeout=freeze_s + 60).__aenter__()
        gw.freeze()
        frozen_at = time.monotonic()

        async def decide_while_frozen() -> None:
            try:
                res = (await deciding.command(Action.DECIDE, [iid], key=key,
                                              decision=Decision(kind=DecisionKind.APPROVE)))[0]
                report.decision_during_gateway_freeze = f"{res.outcome}/{res.error}"
            except (TimeoutError, GatewayError) as exc:
                report.decision_during_gateway_freeze = (
                    f"no answer across the freeze ({type(exc).__name__})")

        try:
            sending = asyncio.create_task(decide_while_frozen())  # sent into the frozen gateway
            await asyncio.sleep(freeze_s)  # the freeze itself: how long the gateway hangs
        finally:
            gw.thaw()
            report.gateway_frozen_s = time.monotonic() - frozen_at
        thawed = datetime.now(UTC)
        try:
            await sending
        finally:
            with contextlib.suppress(Exception):
                await deciding.close()
        async with GatewayClient(gw.url, token, open_timeout=20) as client:
            back = await _until(lambda: beating(client, thawed), client, 90)
            report.agents_back_after_s = back
        # an operator whose send got no answer re-sends it with its key: applied once
        report.notes.append(f"after the gateway freeze: {await _decide_once(gw, token, iid, key)}")
        record = await settled_record(dbos.db, asker, timeout_s=60)
        sent = [m for m in record.sent if isinstance(m["message"], dict)]
        report.gateway_freeze_lost = 0 if sent else 1
        report.gateway_freeze_doubled = 1 if len(sent) > 1 else 0
    return report


async def run_freezes(workdir: Path, *, backend_freeze_s: float = 15.0,
                      gateway_freeze_s: float = 25.0) -> FreezeReport:
    report = await run_backend_freeze(workdir, freeze_s=backend_freeze_s)
    return await run_gateway_freeze(workdir, report, freeze_s=gateway_freeze_s)


@dataclass
class PostgresRestartReport:
    down_s: float = 0.0
    decision_while_down: str = ""  # what the client was answered while the journal was down
    gateway_survived: bool = False
    decided_after_restart: str = ""  # the same key, once PostgreSQL is back
    postgres_restart_lost: int = 0
    postgres_restart_doubled: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"postgres_down_s": round(self.down_s, 1),
                "decision_while_postgres_down": self.decision_while_down,
                "gateway_survived_postgres_restart": self.gateway_survived,
                "decision_after_postgres_restart": self.decided_after_restart,
                "postgres_restart_lost": self.postgres_restart_lost,
                "postgres_restart_doubled": self.postgres_restart_doubled}


async def run_postgres_restart(workdir: Path, *, down_s: float = 5.0) -> PostgresRestartReport:
    """The shared journal's PostgreSQL stopped (fast shutdown) while an operator decides, then
    started again on the same port: the decision, re-sent with its key, reaches the agent
    once, and the gateway never exits."""
    from devtools.chaos.fleet import JournalPostgres
    from devtools.dbos_record import settled_record

    report = PostgresRestartReport()
    with contextlib.ExitStack() as stack:
        pg = JournalPostgres()
        pg.start()
        stack.callback(pg.stop)
        home = workdir / "pgrestart-home"
        tokens = make_tokens(home, clients=1, scopes=["dbos:local"])
        dbos = DBOSWorkerProcess(workdir / "pgrestart-dbos", executor_id="pgr-w1")
        gw = GatewayProcess(home, [dbos.backend_url], name="pgrestart-gw", journal=pg.url)
        gw.start()
        stack.callback(gw.stop)
        dbos.start()
        stack.callback(dbos.stop)
        wid = f"pgr-{uuid.uuid4().hex[:6]}"
        await asyncio.to_thread(dbos.enqueue, [(wid, approval_plan(1))])
        token = tokens["operator"][0]
        async with GatewayClient(gw.url, token, open_timeout=10) as client:
            await _until(lambda: any(i.run_id.endswith("/" + wid)
                                     for i in client.view.pending_interrupts()), client, 60)
            iid = next(i.id for i in client.view.pending_interrupts()
                       if i.run_id.endswith("/" + wid))
            await asyncio.to_thread(pg.shutdown)
            down_at = time.monotonic()
            key = f"pgr-{uuid.uuid4().hex}"
            try:
                res = (await asyncio.wait_for(client.command(
                    Action.DECIDE, [iid], key=key,
                    decision=Decision(kind=DecisionKind.APPROVE)), 30))[0]
                report.decision_while_down = f"{res.outcome}/{res.error}: {res.detail}"[:200]
            except (TimeoutError, GatewayError) as exc:
                report.decision_while_down = f"{type(exc).__name__}: {exc}"[:200]
            await asyncio.sleep(max(0.0, down_s - (time.monotonic() - down_at)))
        await asyncio.to_thread(pg._postmaster)
        report.down_s = time.monotonic() - down_at
        report.gateway_survived = gw.alive()
        report.decided_after_restart = await _decide_once(gw, token, iid, key)
        record = await settled_record(dbos.db, wid, timeout_s=60)
        sent = [m for m in record.sent if isinstance(m["message"], dict)]
        report.postgres_restart_lost = 0 if sent else 1
        report.postgres_restart_doubled = 1 if len(sent) > 1 else 0
    return report
