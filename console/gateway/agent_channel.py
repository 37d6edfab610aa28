"""The agent channel, ``/agent``: instrumented agents push heartbeats and policy events
(agent tokens only), under a frame budget per connection and per token, and are sent the
policy in force (at their hello and at each reload). Trust rules: SECURITY.md."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import cast

from backend_adapters.base import Backend
from console.gateway.agent_links import AgentLinks
from console.gateway.auth import Principal
from console.gateway.beat_checks import check_beat
from console.gateway.budgets import IdentityBuckets, TokenBucket
from console.gateway.gateway_metrics import FrameCounts
from console.gateway.hello import await_hello
from console.gateway.hub import Hub, Reporter
from console.gateway.policy_events import PolicyEvents
from console.gateway.policy_frames import PolicyEvent
from console.gateway.policy_state import PolicyState, ReloadResult
from console.gateway.protocol import (
    AgentHeartbeat,
    AgentHeartbeats,
    FrameError,
    Hello,
    Ping,
    dumps,
    error_frame,
    heartbeat_item,
    parse_agent_frame,
)
from console.gateway.refusals import RefusalLedger
from console.gateway.release_frames import ReleaseResult
from console.gateway.settings import GatewaySettings
from console.gateway.socket import GatewaySocket

log = logging.getLogger("irq.gateway")

BUDGET_BYTES = 2048  # a heartbeats frame costs one budget frame per 2 KiB (about ten beats)


def frame_cost(raw: str | bytes) -> float:
    """What an agent frame costs its connection's and its token's frame budgets: one, or a
    large ``heartbeats`` frame one per BUDGET_BYTES (a batch of beats is many frames' worth)."""
    if len(raw) > 4096 and (b'"heartbeats"' in raw[:64] if isinstance(raw, bytes)
                            else '"heartbeats"' in raw[:64]):
        return max(1.0, len(raw) / BUDGET_BYTES)
    return 1.0


class AgentChannel:
    """Every open ``/agent`` connection, and what each one's frames do to the hub."""

    def __init__(self, settings: GatewaySettings, hub: Hub, backends: dict[str, Backend],
                 policy: PolicyState, policy_events: PolicyEvents, refusals: RefusalLedger,
                 counters: Counter[str], links: AgentLinks | None = None, *,
                 counts: FrameCounts | None = None) -> None:
        """``links``: where the connections are filed by token, for the release requests
        sent back to agents (agent_links.py); ``counts``: frames by type (``/metrics``)."""
        self.settings, self.hub, self.backends = settings, hub, backends
        self.links = links if links is not None else AgentLinks()
        self.policy, self.policy_events = policy, policy_events
        self.refusals, self.counters = refusals, counters
        self.counts = counts if counts is not None else FrameCounts()
        self.agents: set[GatewaySocket] = set()  # open connections (policy frames go to all)
        self.token_budget = IdentityBuckets(settings.agent_identity_frames_per_s,
                                            settings.agent_identity_frames_burst)
        self._unscoped_warned: set[str] = set()

    async def session(self, ws: GatewaySocket, who: Principal) -> None:
        hello = await await_hello(ws, parse_agent_frame, self.settings.max_frame_bytes)
        if hello is None:
            return
        self.counts.got("agent", hello)
        if who.scopes is None and who.identity not in self._unscoped_warned:
            self._unscoped_warned.add(who.identity)
            log.warning("agent token %r has no scope: it may report for any run of this "
                        "gateway (each run stays bound to the first token that reported it); "
                        "replace it with `irq token create --role agent --scope "
                        "BACKEND:CONTEXT[/PREFIX]`", who.identity)
        reporter = Reporter(who.token_id, who.identity)
        budget = TokenBucket(self.settings.agent_frames_per_s, self.settings.agent_frames_burst)
        told_limited = 0.0
        self.agents.add(ws)  # in the same tick as the frame: a reload cannot fall between
        self.links.attach(who.token_id, ws)
        try:
            await ws.send(dumps(self.policy.agent_frame()))
            self.counts.sent["policy"] += 1
            await self._frames(ws, who, reporter, budget, told_limited)
        finally:
            self.agents.discard(ws)
            self.links.detach(who.token_id, ws)

    def policy_reloaded(self, result: ReloadResult) -> None:
        """A new policy goes to every agent connection and to clients; a refused file is a
        notice (the old policy stays in force)."""
        from websockets.asyncio.server import ServerConnection, broadcast

        if result.error is not None:
            log.error("policy not reloaded: %s", result.error)
            self.hub.publish("notice", {"level": "error", "run_id": None, "message":
                                        f"policy not reloaded: {result.error}; policy "
                                        f"{result.version} stays in force"})
        elif result.changed:
            log.info("policy %s loaded from %s", result.version, self.policy.path)
            # broadcast() writes without awaiting (one slow agent holds up no other); it
            # takes websockets' own connections, which every socket here is (serve() made it)
            broadcast(cast(set[ServerConnection], self.agents), dumps(self.policy.agent_frame()))
            self.hub.publish("policy", self.policy.summary())

    async def _frames(self, ws: GatewaySocket, who: Principal, reporter: Reporter,
                      budget: TokenBucket, told_limited: float) -> None:
        async for raw in ws:
            cost = frame_cost(raw)
            if not (budget.take(cost) and self.token_budget.take(who.token_id, cost)):
                self.counters["agent_rate_limited"] += 1
                self.counts.refused("agent")
                self.refusals.refuse(identity=who.identity, role=who.role.value,
                                     action="heartbeat", target="", code="rate_limited",
                                     detail="over the agent frame budget")
                if time.monotonic() - told_limited >= 1.0:  # one error frame a second
                    told_limited = time.monotonic()
                    await ws.send(error_frame(
                        "rate_limited", f"over {budget.rate:g} frames/s per connection or "
                        f"{self.settings.agent_identity_frames_per_s:g} per token; frames are "
                        "being dropped"))
                continue
            target, action = "", "heartbeat"
            try:
                msg = parse_agent_frame(raw, self.settings.max_frame_bytes)
                self.counts.got("agent", msg)
                if isinstance(msg, AgentHeartbeat):
                    key = self.backend_key(msg)
                    target = f"{key}/{msg.native_id}"
                    beat = check_beat(msg, who, key, self.hub.clock())
                    self.hub.agent_heartbeat(target, beat, reporter, len(raw))
                elif isinstance(msg, AgentHeartbeats):
                    await self._beats(ws, who, reporter, msg, len(raw))
                    # let the clients' flushers and the other agents in: a fast agent's
                    # frames are already buffered, and would be read back to back
                    await asyncio.sleep(0)
                elif isinstance(msg, Ping):
                    await ws.send(dumps({"type": "pong", "id": msg.id}))
                elif isinstance(msg, Hello):
                    raise FrameError("invalid", "hello was already received")
                elif isinstance(msg, ReleaseResult):  # after the beat that reports it
                    self.links.answered(who.token_id, msg)
                else:  # a policy_event
                    action = "policy_event"
                    key = self.backend_key(msg)
                    target = f"{key}/{msg.native_id}"
                    self.policy_events.handle(msg, who, key)
            except FrameError as exc:
                self.counters[f"agent_{exc.code}"] += 1
                bound = self.hub.bound_to(target) if exc.code == "bound_to_other" else None
                self.refusals.refuse(  # the audit names the bound token; the agent is not told
                    identity=who.identity, role=who.role.value,
                    action=action,
                    target=target, code=exc.code,
                    detail=exc.message + (f" (bound to {bound.identity})" if bound else ""))
                await ws.send(error_frame(exc.code, exc.message, exc.ref))

    async def _beats(self, ws: GatewaySocket, who: Principal, reporter: Reporter,
                     msg: AgentHeartbeats, size: int) -> None:
        """A heartbeats frame: each beat accepted or refused on its own, as if it came in
        its own frame; one error frame and one refusal per error code per frame. Plain
        beats of runs this connection already reports are taken by hand (plain_beats.py)."""
        now = self.hub.clock()
        each = max(1, size // len(msg.items))
        refused: dict[str, tuple[int, str, str]] = {}  # code -> (count, first message, target)
        keys: dict[tuple[str, str | None], str] = {}  # a batch's beats mostly share theirs

        def slow(i: int, raw: object) -> None:
            item = heartbeat_item(i, raw, msg.id)
            target = ""
            try:
                if isinstance(item, FrameError):
                    raise item
                key = keys.get((item.backend, item.context)) or keys.setdefault(
                    (item.backend, item.context), self.backend_key(item))
                target = f"{key}/{item.native_id}"
                beat = check_beat(item, who, key, now)
                self.hub.agent_heartbeat(target, beat, reporter, each, now)
            except FrameError as exc:
                count, message, first = refused.get(exc.code, (0, exc.message, target))
                refused[exc.code] = (count + 1, message, first)

        if self.hub.takes_plain_beats:
            self.hub.plain_beats.take(msg.items, who, reporter, now, self.key_of, slow)
        else:
            for i, raw in enumerate(msg.items):
                slow(i, raw)
        for code, (count, message, target) in refused.items():
            self.counters[f"agent_{code}"] += count
            bound = self.hub.bound_to(target) if code == "bound_to_other" else None
            detail = (f"{count} of {len(msg.items)} beats of a heartbeats frame refused; "
                      f"first: {message}")
            self.refusals.refuse(
                identity=who.identity, role=who.role.value, action="heartbeat",
                target=target, code=code, items=count,
                detail=detail + (f" (bound to {bound.identity})" if bound else ""))
            await ws.send(error_frame(code, detail, msg.id))

    def backend_key(self, beat: AgentHeartbeat | PolicyEvent) -> str:
        """The ``backend:context`` a beat or policy event reports for (FrameError: none,
        or more than one without a ``context``)."""
        return self.key_of(beat.backend, beat.context)

    def key_of(self, backend: str, context: str | None) -> str:
        if context:
            key = f"{backend}:{context}"
            if key not in self.backends:
                raise FrameError("unknown_backend", f"this gateway has no backend {key}")
        else:
            keys = [k for k in self.backends if k.split(":", 1)[0] == backend]
            if len(keys) != 1:
                raise FrameError(
                    "unknown_backend",
                    f"{len(keys)} {backend} contexts here; set 'context' in the heartbeat")
            key = keys[0]
        return key
