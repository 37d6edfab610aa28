"""End to end: a plain restate-sdk service on a real Restate server is listed by ``irq runs``
of a real ``irq serve --backend restate+http://...`` with its journal, its published interrupt
is in ``irq inbox``, ``irq approve --yes`` reaches the handler exactly once (the handler's own
record), a second approve is a conflict, and ``irq cancel --yes`` ends a waiting invocation."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from restate_scenarios import RestateStack, send

from console.processes import stop_process
from tests.cli.cli_harness import INTERRUPT_FIELDS, RUN_FIELDS, ServedGateway, irq, start_gateway

T = TypeVar("T")


def eventually(check: Callable[[], T | None], what: str, timeout_s: float = 60.0) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(0.2)


@pytest.fixture
def gateway(
    stack: RestateStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ServedGateway]:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("IRQ_HOME", str(home))
    for var in ("IRQ_URL", "IRQ_TOKEN", "IRQ_CONTEXT"):
        monkeypatch.delenv(var, raising=False)
    served = start_gateway(home, [stack.server.backend_url(poll=0.3)])
    try:
        yield served
    finally:
        stop_process(served.process)


def _run(env: dict[str, str], run_id: str) -> dict[str, Any] | None:
    out = irq("runs", "-o", "json", env=env)
    assert out.code == 0, out.stderr
    return next((r for r in json.loads(out.stdout) if r["id"] == run_id), None)


def test_irq_runs_inbox_approve_and_cancel_through_a_real_gateway(
    gateway: ServedGateway, stack: RestateStack
) -> None:
    env = gateway.env(gateway.operator)
    inv = send(stack.server.ingress_url, "IrqHuman/approve", {})
    run_id = f"restate:local/{inv}"

    def item() -> dict[str, Any] | None:
        out = irq("inbox", "-o", "json", env=env)
        assert out.code == 0, out.stderr
        return next((i for i in json.loads(out.stdout) if i["run_id"] == run_id), None)

    interrupt = eventually(item, "the published interrupt in irq inbox")
    assert INTERRUPT_FIELDS <= interrupt.keys()
    assert interrupt["title"] == "Wire funds?" and interrupt["action"] == "wire"
    run = eventually(lambda: _run(env, run_id), "the invocation in irq runs")
    assert RUN_FIELDS <= run.keys()
    assert run["state"] == "waiting" and run["interrupts"] == [interrupt["id"]]
    assert run["name"] == "IrqHuman/approve" and run["abort_timeout_s"] == 660.0

    shown = irq("show", run_id, "-o", "json", env=env)
    assert shown.code == 0, shown.stderr
    assert "prepare" in shown.stdout and "irq:interrupt" in shown.stdout  # the journal

    refused = irq("edit", interrupt["id"], "--args", '{"amount": 1000}', "--yes", env=env)
    assert refused.code == 2, refused.stdout + refused.stderr  # outside the schema
    approved = irq("approve", interrupt["id"], "--yes", "-o", "json", env=env)
    assert approved.code == 0, approved.stdout + approved.stderr
    assert json.loads(approved.stdout)[0]["outcome"] == "applied"
    again = irq("approve", interrupt["id"], "--yes", "-o", "json", env=env)
    assert again.code == 4, again.stdout + again.stderr

    eventually(
        lambda: (_run(env, run_id) or {}).get("state") == "completed", "the run completed"
    )
    decisions = [line for line in stack.lines(inv) if line.startswith("decision ")]
    assert len(decisions) == 1 and '"type": "approve"' in decisions[0]

    other = send(stack.server.ingress_url, "IrqHuman/approve", {})
    other_id = f"restate:local/{other}"
    eventually(lambda: (_run(env, other_id) or {}).get("state") == "waiting", "waiting")
    cancelled = irq("cancel", other_id, "--yes", "--reason", "not needed", env=env)
    assert cancelled.code == 0, cancelled.stdout + cancelled.stderr
    eventually(
        lambda: (_run(env, other_id) or {}).get("state") == "cancelled", "the run cancelled"
    )
    assert "released" in stack.lines(other)
    audit = irq("audit", "-o", "json", env=env)
    assert audit.code == 0, audit.stderr
    entries = json.loads(audit.stdout)
    cancel = next(e for e in entries if e["target"] == other_id and e["action"] == "cancel")
    assert cancel["outcome"] == "applied" and cancel["reason"] == "not needed"
    assert "PATCH /invocations/{id}/cancel" in cancel["plan"]["operations"]
    assert any(e["target"] == interrupt["id"] and e["outcome"] == "applied" for e in entries)
