"""The one rule for a leaked resource (``irq leaks``, the alerts, the console's ``LEAK?`` and
``has:leak``, ``irq runs``' ``!``): irq believes a resource should be free but it is still
reported held when

- its release was expected after a pause or cancel and no release report came by the
  deadline (console/gateway/release_checks.py marks it ``suspected_leak``), or
- its run ended (completed, failed, cancelled, terminated) and the last report still says
  ``held``: nothing of that run will release it any more.

On plain strings, so the CLI's contract dicts and the models ask the same question without
importing the alert machinery (console/leak_conditions.py builds the leaks and conditions).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from console.model import Resource

LeakReason = Literal["no_release_report", "run_ended"]

#: the run states after which nothing of the run releases what it holds
ENDED_STATES = frozenset({"completed", "failed", "cancelled", "terminated"})


def leak_reason(resource_state: str, run_state: str) -> LeakReason | None:
    """Why a resource in ``resource_state`` of a run in ``run_state`` is leaked (None: it
    is not)."""
    if resource_state == "suspected_leak":
        return "no_release_report"
    if resource_state == "held" and run_state in ENDED_STATES:
        return "run_ended"
    return None


def leaked(resources: Iterable[Resource], run_state: str) -> list[str]:
    """The ids of ``resources`` (a run's, in ``run_state``) that are leaked."""
    return [r.id for r in resources if leak_reason(r.state, run_state)]
