"""What the gateway does with an agent's ``policy_event`` frames (policy_frames.py), once the
server has resolved the frame's backend context.

The checks heartbeats have apply (beat_checks.py): the run must be in the agent token's scope,
and a run whose beats come from another token is refused (``bound_to_other``) until that one
may be taken over. An obligation must belong to the frame's run (its ``run_id`` is the run and
its id starts with ``run_id#``), so no agent can open, fulfil or shadow another run's
obligations. Everything is idempotent: a replayed decision (same run, call id and tool) or
obligation (same id) changes nothing, and a replayed fulfilment of a closed obligation is
ignored.
"""

from __future__ import annotations

from datetime import UTC, datetime

from console.gateway.agent_beats import Reporter
from console.gateway.auth import Principal
from console.gateway.beat_checks import MAX_CLOCK_SKEW_S
from console.gateway.hub import Hub
from console.gateway.obligation_store import ObligationStore
from console.gateway.policy_frames import DecisionEvent, FulfilledEvent, PolicyEvent
from console.gateway.protocol import FrameError


class PolicyEvents:
    def __init__(self, hub: Hub, store: ObligationStore) -> None:
        self.hub, self.store = hub, store

    def handle(self, event: PolicyEvent, who: Principal, backend_key: str) -> None:
        """Apply one event for the run ``backend_key/native_id``; FrameError when refused."""
        run_id = f"{backend_key}/{event.native_id}"
        backend, _, context = backend_key.partition(":")
        if not who.may_report(backend, context, event.native_id):
            scopes = ", ".join(str(s) for s in who.scopes or ()) or "nothing"
            raise FrameError("out_of_scope", f"token {who.identity!r} may report for {scopes}, "
                             f"not for {run_id}")
        self.hub.check_reporter(run_id, Reporter(who.token_id, who.identity))
        now = self.hub.clock()
        if isinstance(event, DecisionEvent):
            at = _checked_time(event.at or now, now, "at")
            self.store.add_decision(run_id, event.call_id, event.tool, at, event.decision)
        elif isinstance(event, FulfilledEvent):
            event = event.model_copy(update={"id": _rekeyed(event.id, backend, run_id)})
            found = self.store.get(event.id)
            if found is None or found.run_id != run_id:
                raise FrameError("not_found", f"no obligation {event.id} for {run_id}")
            changed = self.store.fulfil_by_agent(event.id, who.identity, event.note, now)
            if changed is not None:
                self.hub.publish("obligation", changed.model_dump(mode="json"))
        else:
            ob = event.obligation
            if ob.run_id == f"{backend}:/{event.native_id}":
                # an agent that does not know its context (the gateway has one context of its
                # backend and resolved it): the obligation belongs to the resolved run
                ob = ob.model_copy(update={"run_id": run_id,
                                           "id": _rekeyed(ob.id, backend, run_id)})
            if ob.run_id != run_id or not ob.id.startswith(run_id + "#"):
                raise FrameError(
                    "invalid", f"obligation {ob.id!r}: run_id must be {run_id!r} and the id "
                    f"start with '{run_id}#' (the run this frame reports for)")
            ob = ob.model_copy(update={"created_at": _checked_time(ob.created_at, now,
                                                                   "obligation.created_at")})
            added = self.store.add(ob)
            if added is not None:
                self.hub.publish("obligation", added.model_dump(mode="json"))


def _rekeyed(obligation_id: str, backend: str, run_id: str) -> str:
    """``backend:/native#call/rule`` (sent without a context) as ``run_id#call/rule``."""
    native = run_id.partition("/")[2]
    blank = f"{backend}:/{native}#"
    return run_id + "#" + obligation_id[len(blank):] if obligation_id.startswith(blank) else (
        obligation_id)


def _checked_time(at: datetime, now: datetime, name: str) -> datetime:
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at
    if (at - now).total_seconds() > MAX_CLOCK_SKEW_S:
        raise FrameError("invalid", f"{name}: {at.isoformat()} is more than "
                         f"{MAX_CLOCK_SKEW_S:g} s ahead of the gateway's clock; fix the "
                         "agent's clock")
    return at
