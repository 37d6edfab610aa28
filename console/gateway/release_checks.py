"""After pause or cancel: the resources the agent must report released, and by when.

A check is confirmed by a beat of the token bound at the time that reports the run stopped
and the expected resources released (an ``info`` notice); past its deadline it marks them
``suspected_leak`` in the run's latest beat (a ``warning`` notice). While a check waits, the
run store shows the run ``pausing`` / ``cancelling``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from console.gateway.agent_beats import AgentBeats, BeatFacts, Reporter
from console.model import Resource


@dataclass
class ReleaseCheck:
    """After pause/cancel: the resources the agent must report released, by a deadline."""

    action: str
    expected: set[str]
    deadline: datetime
    reporter: Reporter | None = None  # only the token bound at the time may confirm


class ReleaseChecks:
    def __init__(self, beats: AgentBeats, publish: Callable[[str, dict[str, Any]], Any],
                 clock: Callable[[], datetime]) -> None:
        self.beats = beats
        self.publish = publish
        self.clock = clock
        self.checks: dict[str, ReleaseCheck] = {}

    def expect(self, run_id: str, action: str, resource_ids: set[str], within_s: float,
               since: datetime | None = None) -> bool:
        """Watch for the agent's report; False (nothing to watch) for runs whose agent does
        not report to the gateway (nobody could confirm).

        ``since``: when the command was sent to the backend; a beat the gateway accepted
        before that (say the "paused, released" report of an earlier pause, when a pause
        follows a resume before the agent beat again) confirms nothing."""
        facts = self.beats.facts.get(run_id)
        if facts is None:
            return False
        bound = self.beats.bound.get(run_id)
        self.checks[run_id] = ReleaseCheck(
            action=action, expected=set(resource_ids),
            deadline=self.clock() + timedelta(seconds=within_s), reporter=bound)
        # The agent may have noticed the action and reported its release before the backend
        # call returned to us (a Restate handler sees its cancel at once): that report counts.
        seen = facts.seen
        if since is None or (seen is not None and seen >= since):
            self.verify(run_id, facts, bound)
        return True

    def verify(self, run_id: str, beat: BeatFacts, reporter: Reporter | None) -> None:
        """A beat of ``run_id``: does it confirm the release its check waits for?"""
        check = self.checks.get(run_id)
        if check is None:
            return
        if check.reporter is not None and (
            reporter is None or reporter.token_id != check.reporter.token_id
        ):
            return  # only the worker that held the resources can say it released them
        released = {r.id for r in beat.resources or [] if r.state == "released"}
        stopped = beat.phase in ("paused", "cancelled", "completed", "failed")
        if stopped and check.expected <= released:
            del self.checks[run_id]
            kept = [r.id for r in beat.resources or [] if r.state == "held"]
            self.publish("notice", {
                "level": "info", "run_id": run_id,
                "message": f"{run_id}: {check.action} confirmed by the agent; released "
                + (", ".join(sorted(check.expected)) or "nothing")
                + ("; kept " + ", ".join(kept) if kept else ""),
            })

    def overdue(self, now: datetime) -> list[str]:
        """The runs whose check's deadline has passed."""
        return [run_id for run_id, check in self.checks.items() if now >= check.deadline]

    def suspect_leak(self, run_id: str) -> None:
        """No release report by the deadline: the expected resources are suspected leaked."""
        check = self.checks.pop(run_id)
        self.mark_suspected(run_id, check.expected)
        self.publish("notice", {
            "level": "warning", "run_id": run_id,
            "message": f"{run_id}: no release report after {check.action}; suspected leak of "
            + ", ".join(sorted(check.expected)),
        })

    def mark_suspected(self, run_id: str, resource_ids: set[str]) -> bool:
        """Mark those of ``resource_ids`` the run's latest agent beat does not report
        released ``suspected_leak`` (until a beat says otherwise); False when the run has no
        agent beat to mark (its resources come from the adapter alone)."""
        beat = self.beats.facts.get(run_id)
        if beat is None or beat.resources is None:
            return False
        marked = [
            r.model_copy(update={"state": "suspected_leak"})
            if r.id in resource_ids and r.state != "released" else r
            for r in beat.resources
        ]
        self.beats.facts[run_id] = beat._replace(resources=marked)
        return True

    def reported_since(self, run_id: str, since: datetime) -> list[Resource] | None:
        """The resources of the run's latest agent beat when the gateway accepted it at or
        after ``since`` (None: no beat since, or it listed none)."""
        beat = self.beats.facts.get(run_id)
        if beat is None or beat.seen is None or beat.seen < since:
            return None
        return beat.resources
