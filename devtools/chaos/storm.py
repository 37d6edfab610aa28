"""The SIGKILL storm: gateways killed again and again while clients decide and act.

Real agents on two backends: DBOS over SQLite (``console.demo.dbos.worker``, approval plans of
a few interrupts each, plus plain working runs that are paused and resumed) and Temporal's dev
server (the ``ApprovalAgent`` sample workflow). Two ``irq serve`` share one PostgreSQL journal
(``--journal postgresql://…``) and are SIGKILLed alternately; with ``journal="sqlite"`` one
gateway on its SQLite journal is killed and restarted.

Clients behave like ``irq``: every decision carries one idempotency key, chosen once; after a
crash (connection lost, no answer, ``in_progress``) the same command with the same key is sent
again, to whichever gateway answers, until it has an outcome.

The verdict is read at the agents' side, once every workflow has settled: DBOS keeps every
message sent to a workflow (``notifications``), the Temporal workflow returns every decision
its update handler accepted. ``lost``: a decision a client saw applied that no agent received;
``doubled``: an interrupt that received more than one decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.client import GatewayClient, GatewayError
from console.model import Action, Decision, DecisionKind
from devtools.chaos.fleet import (
    DBOSWorkerProcess,
    GatewayProcess,
    JournalPostgres,
    approval_plan,
    idle_plan,
    make_tokens,
)

FINAL = {"applied", "conflict", "failed", "forbidden"}
RETRYABLE = {"not_found", "unreachable"}  # failed answers a client retries with the same key
RETRY_FAILED_S = 30.0
DBOS_INTERRUPTS = 3  # per DBOS approval workflow
TEMPORAL_INTERRUPTS = 4  # per Temporal approval workflow


@dataclass
class StormReport:
    journal: str = "sqlite"
    gateways: int = 1
    kills: int = 0
    kills_by_gateway: Counter[str] = field(default_factory=Counter)
    restart_s: list[float] = field(default_factory=list)
    decisions: int = 0  # applied, as the deciding client saw it
    decisions_by_backend: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    sends: int = 0  # command frames sent for decisions (first tries and retries)
    retries: int = 0  # re-sends of a decision with the same key after a crash
    in_progress: int = 0  # answers "the same key is still running" (then asked again)
    #: failed answers (by error) retried with the same key, e.g. not_found from a gateway
    #: that restarted and has not observed the interrupt yet
    failed_retried: Counter[str] = field(default_factory=Counter)
    gave_up: int = 0  # decisions still without an outcome at the end (must be 0)
    actions: int = 0  # pause/resume commands with an outcome
    action_outcomes: Counter[str] = field(default_factory=Counter)
    action_retries: int = 0
    delivered: int = 0  # decisions the agents received (their own records)
    lost: int = 0
    doubled: int = 0
    delivered_without_applied: int = 0  # received, though the client saw no "applied"
    wrong_kind: int = 0  # received as another decision than the one the client saw applied
    workflows: Counter[str] = field(default_factory=Counter)
    unsettled: int = 0  # workflows that did not finish (none may be left)
    #: gateways that exited while (re)starting and were started again: the last log line
    start_failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "journal": self.journal, "gateways": self.gateways, "kills": self.kills,
            "kills_by_gateway": dict(self.kills_by_gateway),
            "restart_s_median": round(statistics.median(self.restart_s), 2)
            if self.restart_s else 0.0,
            "restart_s_max": round(max(self.restart_s, default=0.0), 2),
            "decisions": self.decisions, "decisions_by_backend": dict(self.decisions_by_backend),
            "decision_outcomes": dict(self.outcomes), "decision_sends": self.sends,
            "decision_retries_same_key": self.retries, "in_progress_answers": self.in_progress,
            "failed_answers_retried": dict(self.failed_retried),
            "gave_up": self.gave_up, "actions": self.actions,
            "action_outcomes": dict(self.action_outcomes), "action_retries": self.action_retries,
            "delivered": self.delivered, "lost": self.lost, "doubled": self.doubled,
            "delivered_without_applied": self.delivered_without_applied,
            "delivered_as_another_kind": self.wrong_kind,
            "workflows": dict(self.workflows), "unsettled_workflows": self.unsettled,
            "gateway_start_failures": len(self.start_failures),
            "gateway_start_failure_reasons": sorted(set(self.start_failures)),
            "storm_seconds": round(self.seconds, 1), "notes": self.notes,
        }


@contextlib.contextmanager
def postgres_journal() -> Iterator[str]:
    """A private PostgreSQL server (:class:`~devtools.chaos.fleet.JournalPostgres`), yielding the
    journal URL; stopped by its pid."""
    server = JournalPostgres()
    try:
        server.start()
        yield server.url
    finally:
        server.stop()


def _wid(run_id: str) -> str:
    """The workflow id of a run id ``BACKEND:CONTEXT/NATIVE_ID``."""
    return run_id.split("/", 1)[-1]


@dataclass
class _Wf:
    backend: str
    wid: str
    interrupts: int
    decided: int = 0


class Storm:
    def __init__(self, gateways: list[GatewayProcess], tokens: dict[str, list[str]],
                 dbos: DBOSWorkerProcess, temporal: Any, task_queue: str, report: StormReport,
                 *, seed: int = 7, deciders: int = 4) -> None:
        self.gateways, self.tokens, self.dbos = gateways, tokens, dbos
        self.temporal, self.task_queue, self.report = temporal, task_queue, report
        self.rng = random.Random(seed)
        self.deciders = deciders
        self.workflows: dict[str, _Wf] = {}  # native workflow id -> workflow
        self.idle_runs: list[str] = []
        self.taken: set[str] = set()  # interrupt ids a client has taken on
        self.applied: dict[tuple[str, str], str] = {}  # (run id, native interrupt) -> kind
        self.storming = True
        self.deciding = True
        self._next_gw = 0

    # ------------------------------------------------------------------ clients

    async def _client(self, token: str) -> GatewayClient:
        """A connected client on whichever gateway answers (round robin)."""
        while True:
            gw = self.gateways[self._next_gw % len(self.gateways)]
            self._next_gw += 1
            client = GatewayClient(gw.url, token, client="chaos-storm", open_timeout=5,
                                   request_timeout=30)
            try:
                await client.connect()
                return client
            except GatewayError:
                await client.close()
                await asyncio.sleep(0.2)

    async def _until_final(self, holder: list[GatewayClient | None], token: str,
                           send: Any) -> tuple[Any, int]:
        """Send (the same key each time) until an outcome; returns (result, re-sends)."""
        resends = 0
        began = time.monotonic()
        while time.monotonic() - began < 300:
            client = holder[0] or await self._client(token)
            holder[0] = client
            try:
                result = (await send(client))[0]
            except GatewayError:
                holder[0] = None
                with contextlib.suppress(Exception):
                    await client.close()
                resends += 1
                await asyncio.sleep(0.1)
                continue
            if result.error == "in_progress":
                self.report.in_progress += 1
                resends += 1
                await asyncio.sleep(0.3)
                continue
            if result.outcome == "failed" and result.error in RETRYABLE and (
                    time.monotonic() - began < RETRY_FAILED_S):
                # e.g. a gateway that restarted and has not observed the interrupt yet: the
                # same key again is safe (nothing was journaled for it)
                self.report.failed_retried[str(result.error)] += 1
                resends += 1
                await asyncio.sleep(0.5)
                continue
            if result.outcome in FINAL:
                return result, resends
            resends += 1
            await asyncio.sleep(0.3)
        return None, resends

    # ----------------------------------------------------------------- decisions

    async def decider(self, n: int) -> None:
        token = self.tokens["operator"][n % len(self.tokens["operator"])]
        holder: list[GatewayClient | None] = [None]
        rng = random.Random(self.rng.random())
        try:
            while self.deciding:
                client = holder[0] or await self._client(token)
                holder[0] = client
                mine = [i for i in client.view.pending_interrupts()
                        if i.id not in self.taken and _wid(i.run_id) in self.workflows]
                if not mine:
                    try:
                        await asyncio.wait_for(client.updates(), 0.5)
                    except TimeoutError:
                        pass
                    if client.closed_reason:
                        await client.close()
                        holder[0] = None
                    continue
                intr = rng.choice(mine)
                self.taken.add(intr.id)
                kind = DecisionKind.APPROVE if rng.random() < 0.8 else DecisionKind.REJECT
                key = f"chaos-{uuid.uuid4().hex}"
                decision = Decision(kind=kind, feedback="chaos" if kind == "reject" else None)

                async def send(c: GatewayClient, iid: str = intr.id,
                               d: Decision = decision, k: str = key) -> Any:
                    self.report.sends += 1
                    return await c.command(Action.DECIDE, [iid], decision=d, key=k,
                                           reason="chaos storm")

                result, resends = await self._until_final(holder, token, send)
                self.report.retries += resends
                wf = self.workflows[_wid(intr.run_id)]
                if result is None:
                    self.report.gave_up += 1
                    continue
                self.report.outcomes[result.outcome] += 1
                if result.outcome == "applied":
                    self.report.decisions += 1
                    self.report.decisions_by_backend[wf.backend] += 1
                    self.applied[(wf.wid, intr.native_id)] = kind.value
                if result.outcome in ("applied", "conflict"):
                    wf.decided += 1  # this interrupt is settled, one way or the other
                else:  # failed (e.g. a backend too slow): an operator tries again, new key
                    self.report.notes.append(f"{intr.id}: {result.outcome}: {result.detail}"[:200])
                    asyncio.get_running_loop().call_later(2.0, self.taken.discard, intr.id)
        finally:
            if holder[0] is not None:
                await holder[0].close()

    # ------------------------------------------------------------------- actions

    async def actor(self) -> None:
        """Pause, then resume, working DBOS runs (one key per command, re-sent after a
        crash until it has an outcome)."""
        token = self.tokens["admin"][0]
        holder: list[GatewayClient | None] = [None]
        try:
            while self.storming:
                client = holder[0] or await self._client(token)
                holder[0] = client
                view = client.view
                running = [r for r in self.idle_runs
                           if r in view.runs and view.runs[r].state.value == "running"]
                if not running:
                    await asyncio.sleep(0.5)
                    if client.closed_reason:
                        await client.close()
                        holder[0] = None
                    continue
                run_id = self.rng.choice(running)
                for action in (Action.PAUSE, Action.RESUME):
                    key = f"chaos-{action.value}-{uuid.uuid4().hex}"

                    async def send(c: GatewayClient, a: Action = action, k: str = key,
                                   r: str = run_id) -> Any:
                        return await c.command(a, [r], key=k, reason="chaos storm")

                    result, resends = await self._until_final(holder, token, send)
                    self.report.action_retries += resends
                    if result is not None:
                        self.report.actions += 1
                        self.report.action_outcomes[f"{action.value}:{result.outcome}"] += 1
                    await asyncio.sleep(0.5)
        finally:
            if holder[0] is not None:
                await holder[0].close()

    # -------------------------------------------------------------------- supply

    def _start_dbos(self, count: int) -> None:
        plans = []
        for _ in range(count):
            wid = f"chaos-{uuid.uuid4().hex[:10]}"
            plans.append((wid, approval_plan(DBOS_INTERRUPTS)))
            self.workflows[wid] = _Wf("dbos", wid, DBOS_INTERRUPTS)
        self.dbos.enqueue(plans)
        self.report.workflows["dbos"] += count

    def _start_temporal(self, count: int) -> None:
        for _ in range(count):
            wid = f"chaos-{uuid.uuid4().hex[:10]}"
            params = {"interrupts": [{"title": f"chaos approval {n}", "id": f"i{n}",
                                      "action": "deploy", "args": {"n": n},
                                      "allowed": ["approve", "reject"]}
                                     for n in range(1, TEMPORAL_INTERRUPTS + 1)],
                      "linger_s": 1}
            self.temporal.start_workflow(wid, "ApprovalAgent", self.task_queue, params)
            self.workflows[wid] = _Wf("temporal", wid, TEMPORAL_INTERRUPTS)
            self.report.workflows["temporal"] += 1

    def start_idle(self, count: int, seconds: float) -> None:
        plans = []
        for _ in range(count):
            wid = f"chaos-idle-{uuid.uuid4().hex[:8]}"
            plans.append((wid, idle_plan(seconds)))
            self.idle_runs.append(f"dbos:local/{wid}")
        self.dbos.enqueue(plans)
        self.report.workflows["dbos_idle"] += count

    async def supplier(self, outstanding: int) -> None:
        """Keep about ``outstanding`` undecided workflows per backend."""
        while self.storming:
            for backend, start in (("dbos", self._start_dbos),
                                   ("temporal", self._start_temporal)):
                open_ = sum(1 for w in self.workflows.values()
                            if w.backend == backend and w.decided < w.interrupts)
                if open_ < outstanding:
                    await asyncio.to_thread(start, outstanding - open_)
            await asyncio.sleep(1.0)

    # --------------------------------------------------------------------- kills

    async def killer(self, kills: int, min_up_s: float, max_s: float) -> None:
        """SIGKILL the gateways in turn, each once it has been up ``min_up_s`` to twice that
        (random), and restart it at once; ``kills`` in all, or as many as fit in ``max_s``."""
        restarts: dict[str, asyncio.Task[float]] = {}
        up_since = {gw.name: time.monotonic() for gw in self.gateways}
        turn = 0
        stop_at = time.monotonic() + max_s
        while self.report.kills < kills and time.monotonic() < stop_at:
            gw = self.gateways[turn % len(self.gateways)]
            turn += 1
            if gw.name in restarts:
                up_s = await restarts.pop(gw.name)
                self.report.restart_s.append(up_s)
                up_since[gw.name] = time.monotonic()
            wait = up_since[gw.name] + min_up_s + self.rng.uniform(0, min_up_s) - time.monotonic()
            await asyncio.sleep(max(0.0, wait))
            gw.kill()
            self.report.kills += 1
            self.report.kills_by_gateway[gw.name] += 1
            restarts[gw.name] = asyncio.create_task(asyncio.to_thread(gw.start))
            if len(self.gateways) == 1:
                await asyncio.sleep(0)
        for task in restarts.values():
            self.report.restart_s.append(await task)

    # ------------------------------------------------------------------- verdict

    async def settle(self, timeout_s: float) -> None:
        """Wait for every workflow to finish, then count deliveries from the agents' records."""
        from devtools.dbos_record import read_record

        deadline = time.monotonic() + timeout_s
        delivered: dict[tuple[str, str], int] = {}
        kinds: dict[tuple[str, str], str] = {}  # the decision each interrupt received first
        for wid, wf in list(self.workflows.items()):
            if wf.backend == "dbos":
                while True:
                    record = await asyncio.to_thread(read_record, self.dbos.db, wf.wid)
                    if record.settled or time.monotonic() > deadline:
                        break
                    await asyncio.sleep(0.5)
                if not record.settled:
                    self.report.unsettled += 1
                for message in record.sent:
                    body = message["message"]
                    if isinstance(body, dict) and body.get("interrupt_id"):
                        key = (wid, str(body["interrupt_id"]))
                        delivered[key] = delivered.get(key, 0) + 1
                        kinds.setdefault(key, str(body.get("type")))
            else:
                left = max(1.0, deadline - time.monotonic())
                try:
                    close = await asyncio.to_thread(self.temporal.result, wf.wid, left)
                    result = close["workflowExecutionCompletedEventAttributes"]["result"][0]
                except Exception as exc:  # not finished, or failed: it counts as unsettled
                    self.report.unsettled += 1
                    self.report.notes.append(f"{wid}: {type(exc).__name__}: {exc}"[:200])
                    continue
                for d in result["delivered"]:
                    key = (wid, str(d["interrupt_id"]))
                    delivered[key] = delivered.get(key, 0) + 1
                    kinds.setdefault(key, str(d.get("kind")))
        self.report.delivered = sum(delivered.values())
        self.report.lost = sum(1 for k in self.applied if delivered.get(k, 0) == 0)
        self.report.doubled = sum(1 for n in delivered.values() if n > 1)
        self.report.delivered_without_applied = sum(
            1 for k in delivered if k not in self.applied)
        self.report.wrong_kind = sum(
            1 for k, kind in self.applied.items() if k in kinds and kinds[k] != kind)


async def run_storm(workdir: Path, *, kills: int = 100, journal: str = "postgresql",
                    outstanding: int = 6, deciders: int = 4, min_up_s: float = 1.5,
                    drain_s: float = 120.0, max_storm_s: float = 600.0,
                    seed: int = 7) -> StormReport:
    """Start the fleet in ``workdir``, storm it with ``kills`` SIGKILLs, drain, count."""
    from backend_adapters.temporal.dev_server import DevServer
    from devtools.temporal_sample_worker import WorkerProcess

    report = StormReport(journal=journal, gateways=2 if journal == "postgresql" else 1)
    workdir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        journal_url = (stack.enter_context(postgres_journal())
                       if journal == "postgresql" else "")
        temporal = DevServer(workdir / "temporal")
        temporal.start()
        stack.callback(temporal.stop)
        task_queue = f"chaos-{uuid.uuid4().hex[:6]}"
        worker = WorkerProcess(address=temporal.address, task_queue=task_queue,
                               identity="chaos-temporal-worker",
                               log_path=workdir / "temporal-worker.log")
        worker.start()
        stack.callback(worker.stop)
        home = workdir / "storm-home"
        tokens = make_tokens(home, clients=deciders, agents=1, scopes=["dbos:local"])
        dbos = DBOSWorkerProcess(workdir / "dbos")
        backends = [dbos.backend_url,
                    temporal.backend_url(rps=100, query=f"TaskQueue='{task_queue}'", timeout=5,
                                         poll=0.5)]
        names = ["gw-a", "gw-b"] if journal == "postgresql" else ["gw-a"]
        gateways = [GatewayProcess(home, backends, name=n, journal=journal_url)
                    for n in names]
        for gw in gateways:
            gw.start()
            stack.callback(gw.stop)
        dbos.agent_url, dbos.agent_token = gateways[0].agent_url, tokens["agent"][0]
        dbos.start()
        stack.callback(dbos.stop)

        storm = Storm(gateways, tokens, dbos, temporal, task_queue, report, seed=seed,
                      deciders=deciders)
        began = time.monotonic()
        storm.start_idle(3, seconds=600)
        tasks = [asyncio.create_task(storm.supplier(outstanding)),
                 asyncio.create_task(storm.actor())]
        tasks += [asyncio.create_task(storm.decider(n)) for n in range(deciders)]
        try:
            await storm.killer(kills, min_up_s, max_storm_s)
            if report.kills < kills:
                report.notes.insert(0, f"stopped after {max_storm_s:g} s: {report.kills} of "
                                       f"{kills} kills (gateway restarts took "
                                       f"{statistics.median(report.restart_s or [0]):.1f} s)")
            storm.storming = False
            # drain: every interrupt of every started workflow decided, on live gateways
            deadline = time.monotonic() + drain_s
            while time.monotonic() < deadline and any(
                    w.decided < w.interrupts for w in storm.workflows.values()):
                if all(t.done() for t in tasks[2:]):
                    break
                await asyncio.sleep(0.5)
            storm.deciding = False
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 120)
            await storm.settle(timeout_s=drain_s)
        finally:
            storm.storming = storm.deciding = False
            for t in tasks:
                t.cancel()
            report.seconds = time.monotonic() - began
            report.start_failures = [f for gw in gateways for f in gw.start_failures]
    return report
