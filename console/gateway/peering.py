"""Gateways sharing one PostgreSQL journal see one world: what each observes goes to the
others (peer_events.py is the table; this is what goes in and how it is applied).

Out, in batches every :data:`FLUSH_S`:

- the leaseholder of a backend context (context_leases.py) sends what its polls changed:
  the adapter's runs that differ from what it last sent, runs gone, the context's interrupts
  when they changed, the backend's health when it changed;
- every gateway sends the agent beats it accepted (the latest per run per batch), with the
  token that reported them, so the run is bound to the same token everywhere;
- notices, obligation changes and audit entries published here; a decision applied here
  (``decided``) and an approval recorded here (``approvals``), which peers re-read from the
  shared journal.

In: a peer's rows are applied to this gateway's hub through the hub's own entry points
(``observe_runs``, ``observe_interrupts``, ``set_health``, ``agent_heartbeat``, ``publish``),
so liveness, merging and filters work as for local input. Observations of a context this
gateway holds itself are ignored (its own polls are authoritative). Nothing applied from a
peer is sent on again, and notifications (webhooks) fire only on the gateway holding the
event's context (:meth:`Peering.notifies`), so each fires once.

A gateway that starts (or fell behind the pruned table) writes a ``join`` row; each peer
answers with its current state (the observations it last sent for the contexts it holds and
the latest beats it received), so the newcomer catches up from a snapshot, not from history.

On the SQLite journal (one gateway) peering is off and costs nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from console.gateway.agent_beats import Reporter
from console.gateway.context_leases import ContextLeases
from console.gateway.hub import Hub
from console.gateway.journal_store import JournalStore
from console.gateway.peer_events import CHANNEL, PeerEvents, PeerRow
from console.gateway.protocol import AgentHeartbeat, FrameError
from console.model import BackendHealth, Interrupt, Run

log = logging.getLogger("irq.gateway.peering")

FLUSH_S = 0.25  # a batch at most this often
READ_FALLBACK_S = 1.0  # read even without a NOTIFY (a lost listening connection)
PRUNE_EVERY_S = 30.0
RUNS_PER_ITEM = 500
MAX_BEATS_KEPT = 20_000  # latest beat per run received here, for a joining peer
SHARED_KINDS = ("notice", "obligation", "audit", "alert")
HEALTH_REFRESH_S = 5.0  # an unchanged backend health goes out again this often (last_ok_at)


class PeerHub(Hub):
    """The hub, telling peering about every beat an agent pushed here."""

    beat_sink: Callable[[str, AgentHeartbeat, Reporter | None], None] | None = None

    @property
    def takes_plain_beats(self) -> bool:
        return self.beat_sink is None  # peering is told of every beat, as a model

    def agent_heartbeat(self, run_id: str, beat: AgentHeartbeat,
                        reporter: Reporter | None = None, size: int = 0,
                        now: datetime | None = None) -> None:
        super().agent_heartbeat(run_id, beat, reporter, size, now)
        if self.beat_sink is not None:
            self.beat_sink(run_id, beat, reporter)


class Peering:
    def __init__(self, hub: Hub, journal: JournalStore, leases: ContextLeases, *,
                 decided: Callable[[str], Any],
                 refresh_interrupt: Callable[[str], None] = lambda _iid: None,
                 on_context_read: Callable[[str], None] = lambda _key: None) -> None:
        self.hub = hub
        self.journal = journal
        self.leases = leases
        self.origin = leases.holder
        self.enabled = not journal.exclusive
        self.decided = decided
        self.refresh_interrupt = refresh_interrupt
        self.on_context_read = on_context_read
        self.events = PeerEvents(journal, self.origin) if self.enabled else None
        self.cursor = 0
        self._out: list[dict[str, Any]] = []
        #: beats to send (the latest per run) and the latest received here, for a joining
        #: peer: kept as parsed and encoded only when sent (a flood costs a dict write each)
        self._beats_out: dict[str, tuple[AgentHeartbeat, Reporter | None]] = {}
        self._sent_runs: dict[str, dict[str, Run]] = {}
        self._sent_interrupts: dict[str, tuple[list[dict[str, Any]], bool]] = {}
        self._sent_health: dict[str, dict[str, Any]] = {}
        self._beats: OrderedDict[str, tuple[AgentHeartbeat, Reporter | None]] = OrderedDict()
        self._applying = False
        self._answer_join = False
        self._wake = asyncio.Event()
        self.counters: dict[str, int] = {"rows_written": 0, "rows_applied": 0,
                                         "items_applied": 0, "joins": 0, "write_errors": 0}
        self.peers_seen: dict[str, float] = {}  # origin -> monotonic time of its last row
        if self.enabled and isinstance(hub, PeerHub):
            hub.beat_sink = self.beat
        if self.enabled:
            hub.listeners.append(self._listener)

    def set_origin(self, origin: str) -> None:
        self.origin = origin
        if self.events is not None:
            self.events.origin = origin

    # ------------------------------------------------------------------------ outgoing

    def observed(self, key: str, runs: list[Run], gone: list[str],
                 interrupts: list[Interrupt], complete: bool) -> None:
        """A poll of ``key`` by its leaseholder (this gateway): what changed goes out."""
        if not self.enabled:
            return
        sent = self._sent_runs.setdefault(key, {})
        changed = [r for r in runs if sent.get(r.id) != r]
        for run in changed:
            sent[run.id] = run
        for run_id in gone:
            sent.pop(run_id, None)
        if changed or gone:
            self._queue_runs(key, changed, gone)
        items = [i.model_dump(mode="json") for i in interrupts]
        if self._sent_interrupts.get(key) != (items, complete):
            self._sent_interrupts[key] = (items, complete)
            self._out.append({"k": "interrupts", "ctx": key, "items": items,
                              "complete": complete})

    def health(self, key: str, health: BackendHealth) -> None:
        if not self.enabled:
            return
        data = health.model_dump(mode="json")
        same = {k: v for k, v in data.items() if k != "last_ok_at"}
        last = self._sent_health.get(key)
        now = time.monotonic()
        if last is None or {k: v for k, v in last.items() if k not in ("last_ok_at", "_at")
                            } != same or now - float(last.get("_at", 0)) > HEALTH_REFRESH_S:
            self._sent_health[key] = {**data, "_at": now}
            self._out.append({"k": "health", "ctx": key, "health": data})

    def _queue_runs(self, key: str, runs: list[Run], gone: list[str]) -> None:
        for i in range(0, max(1, len(runs)), RUNS_PER_ITEM):
            self._out.append({"k": "runs", "ctx": key, "gone": gone if i == 0 else [],
                              "runs": [r.model_dump(mode="json")
                                       for r in runs[i:i + RUNS_PER_ITEM]]})

    def context_lost(self, key: str) -> None:
        """Another gateway holds ``key`` now: what was sent is forgotten (sent again in full
        if this gateway takes it back)."""
        self._sent_runs.pop(key, None)
        self._sent_interrupts.pop(key, None)
        self._sent_health.pop(key, None)

    def beat(self, run_id: str, beat: AgentHeartbeat, reporter: Reporter | None) -> None:
        """A beat an agent pushed here (the hub accepted it)."""
        if self._applying:
            return
        if beat.at is None:
            beat = beat.model_copy(update={"at": datetime.now(UTC)})
        self._beats_out[run_id] = (beat, reporter)
        self._beats[run_id] = (beat, reporter)
        self._beats.move_to_end(run_id)
        while len(self._beats) > MAX_BEATS_KEPT:
            self._beats.popitem(last=False)

    def _listener(self, event: dict[str, Any]) -> None:
        if self._applying:
            return
        kind = event["kind"]
        if kind in SHARED_KINDS:
            self._out.append({"k": "event", "kind": kind, "data": event["data"]})
        elif kind == "interrupt":
            data = event["data"]
            if data.get("status") == "decided":
                self._out.append({"k": "decided", "id": data.get("id")})
            elif (data.get("policy") or {}).get("approvals"):
                self._out.append({"k": "approvals", "id": data.get("id")})

    def notifies(self, event: dict[str, Any]) -> bool:
        """Whether a notification (webhook) for ``event`` is this gateway's to send: for an
        event about a context, only on the gateway holding it; else only a local one."""
        if not self.enabled:
            return True
        scope = getattr(event, "scope", None)
        if scope is not None and scope in self.leases.contexts:
            return self.leases.holds(scope)
        return not self._applying

    def _full_state(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for key in sorted(self.leases.held):
            runs = list(self._sent_runs.get(key, {}).values())
            if runs:
                for i in range(0, len(runs), RUNS_PER_ITEM):
                    items.append({"k": "runs", "ctx": key, "gone": [], "runs": [
                        r.model_dump(mode="json") for r in runs[i:i + RUNS_PER_ITEM]]})
            if key in self._sent_interrupts:
                listed, complete = self._sent_interrupts[key]
                items.append({"k": "interrupts", "ctx": key, "items": listed,
                              "complete": complete})
            if key in self._sent_health:
                health = {k: v for k, v in self._sent_health[key].items() if k != "_at"}
                items.append({"k": "health", "ctx": key, "health": health})
        items.extend(_beat_item(run_id, *held) for run_id, held in self._beats.items())
        return items

    def flush(self) -> tuple[str, list[dict[str, Any]]] | None:
        """What the next row carries (and empties the queues); None: nothing to send."""
        items, self._out = self._out, []
        if self._answer_join:
            self._answer_join = False
            items = self._full_state() + items
        items.extend(_beat_item(run_id, *out) for run_id, out in self._beats_out.items())
        self._beats_out = {}
        return ("batch", items) if items else None

    # ------------------------------------------------------------------------ incoming

    def apply(self, row: PeerRow) -> None:
        self.cursor = max(self.cursor, row.seq)
        if row.origin == self.origin:
            return
        self.peers_seen[row.origin] = time.monotonic()
        self.counters["rows_applied"] += 1
        if row.kind == "join":
            self._answer_join = True
            return
        items = row.payload if isinstance(row.payload, list) else []
        self._applying = True
        try:
            for item in items:
                try:
                    self._apply_item(item)
                    self.counters["items_applied"] += 1
                except Exception:
                    log.exception("applying a peer's %s from %s failed", item.get("k"),
                                  row.origin)
        finally:
            self._applying = False

    def _apply_item(self, item: dict[str, Any]) -> None:
        k = item.get("k")
        key = str(item.get("ctx") or "")
        if k in ("runs", "interrupts", "health"):
            if key not in self.leases.contexts or self.leases.holds(key):
                return  # not a context of ours, or ours to observe
        if k == "runs":
            self.hub.observe_runs([Run.model_validate(r) for r in item["runs"]],
                                  list(item.get("gone") or []))
            self.on_context_read(key)
        elif k == "interrupts":
            self.hub.observe_interrupts(
                key, [Interrupt.model_validate(i) for i in item["items"]],
                bool(item.get("complete")), self.decided)
            self.on_context_read(key)
        elif k == "health":
            self.hub.set_health(BackendHealth.model_validate(item["health"]))
        elif k == "beat":
            reporter = (Reporter(item["tok"], item.get("who") or "")
                        if item.get("tok") else None)
            with contextlib.suppress(FrameError):  # bound to another token here: theirs
                self.hub.agent_heartbeat(item["run"], AgentHeartbeat.model_validate(
                    item["beat"]), reporter)
        elif k == "event":
            data = dict(item["data"])
            self.hub.publish(str(item["kind"]), data)
            if (item["kind"] == "audit" and data.get("action") == "resume"
                    and data.get("outcome") == "applied"):  # as on the gateway that resumed:
                self.hub.unbind(str(data.get("target")))  # any worker of its scope reports
        elif k == "decided":
            iid = str(item.get("id"))
            intr = self.hub.interrupts.get(iid)
            if intr is not None and intr.status == "pending":
                claim = self.decided(iid)
                if claim is not None and claim.status == "applied":
                    self.hub.mark_decided(iid, claim)
        elif k == "approvals":
            self.refresh_interrupt(str(item.get("id")))

    # --------------------------------------------------------------------------- loops

    async def run(self) -> None:
        """Write batches, listen, read and apply, prune: until cancelled."""
        if not self.enabled or self.events is None:
            return
        events = self.events
        _oldest, self.cursor = await asyncio.to_thread(events.bounds)
        await asyncio.to_thread(events.write, "join", {})
        self.counters["joins"] += 1
        await asyncio.gather(self._writer(events), self._reader(events), self._listen(),
                             self._pruner(events))

    async def _writer(self, events: PeerEvents) -> None:
        while True:
            await asyncio.sleep(FLUSH_S)
            batch = self.flush()
            if batch is None:
                continue
            try:
                await asyncio.to_thread(events.write, *batch)
                self.counters["rows_written"] += 1
            except Exception as exc:
                self.counters["write_errors"] += 1
                log.warning("writing events for peer gateways failed: %s", exc)
                for key in list(self._sent_runs):  # everything goes again with the next poll
                    self.context_lost(key)

    async def _reader(self, events: PeerEvents) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), READ_FALLBACK_S)
            self._wake.clear()
            try:
                while True:
                    rows = await asyncio.to_thread(events.read_since, self.cursor)
                    if not rows:
                        break
                    if rows[0].seq > self.cursor + 1 and self.cursor:
                        oldest, _ = await asyncio.to_thread(events.bounds)
                        if oldest > self.cursor + 1:  # pruned past us: ask for state
                            await asyncio.to_thread(events.write, "join", {})
                            self.counters["joins"] += 1
                    for row in rows:
                        self.apply(row)
            except Exception as exc:
                log.warning("reading peer gateways' events failed: %s", exc)

    async def _listen(self) -> None:
        """LISTEN on a connection of its own; a NOTIFY wakes the reader at once."""
        import psycopg

        url = getattr(self.journal, "url", "")
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    url, autocommit=True, connect_timeout=10,
                    application_name="irq-gateway-listen")
                async with conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self._wake.set()  # read what came before the LISTEN
                    async for _note in conn.notifies():
                        self._wake.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("listening for peer gateways failed (reading every %g s): %s",
                            READ_FALLBACK_S, type(exc).__name__)
            await asyncio.sleep(1.0)

    async def _pruner(self, events: PeerEvents) -> None:
        while True:
            await asyncio.sleep(PRUNE_EVERY_S)
            with contextlib.suppress(Exception):
                await asyncio.to_thread(events.prune)

    def stats(self) -> dict[str, Any]:
        now = time.monotonic()
        return {"cursor": self.cursor, **self.counters,
                "peers_seen_s_ago": {o: round(now - t, 2)
                                     for o, t in sorted(self.peers_seen.items())}}


def _beat_item(run_id: str, beat: AgentHeartbeat, reporter: Reporter | None) -> dict[str, Any]:
    return {"k": "beat", "run": run_id, "beat": beat.model_dump(mode="json", exclude_none=True),
            "tok": reporter.token_id if reporter else None,
            "who": reporter.identity if reporter else None}
