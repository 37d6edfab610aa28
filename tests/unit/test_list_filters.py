"""``irq runs --filter`` and ``irq inbox --filter`` select with the TUI's / grammar."""

from __future__ import annotations

from datetime import UTC, datetime

from console.cli.inbox import select_interrupts
from console.cli.runs import select_runs
from console.client import FleetView
from console.model import Interrupt, Resource, Run, RunState


def _view() -> FleetView:
    view = FleetView()
    now = datetime.now(UTC)
    gpu = Resource(id="gpu-0", kind="gpu", state="held")
    for backend, native, resources in (("dbos", "a", [gpu]), ("dbos", "b", []),
                                       ("temporal", "c", [gpu])):
        run = Run(id=Run.make_id(backend, "local", native), backend=backend, context="local",
                  native_id=native, name=f"job-{native}", state=RunState.RUNNING,
                  started_at=now, resources=resources)
        view.runs[run.id] = run
    intr = Interrupt(id="dbos:local/a#1", run_id="dbos:local/a", native_id="a", title="Refund?",
                     action="issue_refund", created_at=now)
    view.interrupts[intr.id] = intr
    intr2 = Interrupt(id="dbos:local/b#1", run_id="dbos:local/b", native_id="b", title="Drop?",
                      action="drop_table", created_at=now)
    view.interrupts[intr2.id] = intr2
    return view


def test_runs_filter_by_backend_and_resource_kind() -> None:
    ids = [c["id"] for c in select_runs(_view(), set(), None, "backend:dbos has:gpu")]
    assert ids == ["dbos:local/a"]
    assert len(select_runs(_view(), set(), None, "-backend:dbos")) == 1
    assert len(select_runs(_view(), set(), None, None)) == 3


def test_inbox_filter_by_tool() -> None:
    found = select_interrupts(_view(), False, None, "tool:drop_table")
    assert [c["id"] for c in found] == ["dbos:local/b#1"]
