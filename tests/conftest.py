"""Suite-wide: how the tests are grouped and ordered for a parallel run (pytest-xdist,
``--dist loadgroup``, as ``make test`` runs them).

- Every test of one file runs on one worker, so a module-scoped server (a Restate stack, a
  LangGraph Agent Server, a DBOS worker) starts once, as it does in a serial run.
- Every test that uses the session's live DBOS fleet (``live_fleet``: ``irq serve`` and 20
  agents) runs on one worker: the fleet is started once, not once per worker.
- The longest groups go first, so the run does not end waiting on one long file that was
  handed out last.
"""

from __future__ import annotations

import pytest


def _group(item: pytest.Item) -> str:
    if "live_fleet" in getattr(item, "fixturenames", ()):
        return "live_fleet"
    return item.nodeid.split("::", 1)[0]


def _weight(item: pytest.Item) -> int:
    """0 runs first: the live fleet's group (about 5 minutes serially), then the files marked
    slow (end-to-end runs of demo fleets and gateways), then the rest in collection order."""
    if _group(item) == "live_fleet":
        return 0
    return 1 if item.get_closest_marker("slow") else 2


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups into node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(_group(item)))
    items.sort(key=_weight)  # stable: a file's tests keep their order
