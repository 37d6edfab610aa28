"""Checks on an agent's heartbeat that need the gateway's clock or its token.

The parser already refused what is malformed on its face (non-finite numbers, progress
outside 0..1, absurd seq, intervals and timeouts beyond bounds, oversized frames); here the
beat is checked against the token's scope and against the gateway's clock."""

from __future__ import annotations

from datetime import UTC, datetime

from console.gateway.auth import Principal
from console.gateway.protocol import AgentHeartbeat, FrameError

MAX_CLOCK_SKEW_S = 30.0  # how far in the future a beat's ``at`` may be


def check_beat(beat: AgentHeartbeat, who: Principal, backend_key: str,
               now: datetime) -> AgentHeartbeat:
    """The beat as accepted (a naive ``at`` is taken as UTC), or FrameError."""
    backend, _, context = backend_key.partition(":")
    if not who.may_report(backend, context, beat.native_id):
        scopes = ", ".join(str(s) for s in who.scopes or ()) or "nothing"
        raise FrameError(
            "out_of_scope",
            f"token {who.identity!r} may report for {scopes}, not for "
            f"{backend_key}/{beat.native_id}")
    at = beat.at
    if at is not None and at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
        beat = beat.model_copy(update={"at": at})
    if at is not None and ahead_of_clock(at, now):
        raise FrameError(
            "invalid",
            f"at: {at.isoformat()} is more than {MAX_CLOCK_SKEW_S:g} s ahead of the gateway's "
            "clock; fix the agent's clock")
    return beat


def ahead_of_clock(at: datetime, now: datetime) -> bool:
    """Is a beat's ``at`` (aware) further ahead of the gateway's clock than a beat may be?"""
    return (at - now).total_seconds() > MAX_CLOCK_SKEW_S
