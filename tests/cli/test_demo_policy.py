"""The demo runs on a policy: ``console/demo/policy.toml`` loads, every case in
``policy_cases.toml`` passes and together they exercise every rule; and real demo agents
(the DBOS demo worker, guarded, against ``irq serve --policy``) meet it: the analytics agent's
PHI export becomes an inbox item naming its rule, approving it runs the tool once and opens the
CISO obligation with its deadline, and the compliance agent's obligation is waived naming the
dispensation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from cli_harness import ROOT, gateway_ready, irq

from console.demo.launcher import DEMO_AGENT_CONTEXT, DEMO_POLICY, dbos_backend_url
from console.policy.engine import PolicyEngine
from console.policy.loader import load_policy
from console.policy.model import Invocation
from console.processes import free_port, stop_process

DEMO_CASES = DEMO_POLICY.with_name("policy_cases.toml")


# --------------------------------------------------------------------------- the policy file


def _case_invocations() -> list[Invocation]:
    import tomllib

    cases = tomllib.loads(DEMO_CASES.read_text())["cases"]
    return [Invocation.model_validate(case["invocation"]) for case in cases]


def test_the_demo_policy_loads_and_every_case_passes() -> None:
    from console.policy.cases import run_cases

    policy = load_policy(DEMO_POLICY)
    assert policy.version.startswith("sha256:")
    report = run_cases(DEMO_CASES)
    failed = [case for case in report.cases if not case.passed]
    assert not failed, "\n".join(f"{c.name}: {c.reason}" for c in failed)
    assert len(report.cases) == len(_case_invocations()) >= 15


def test_the_cases_exercise_every_rule_of_the_demo_policy() -> None:
    engine = PolicyEngine(load_policy(DEMO_POLICY))
    matched: set[str] = set()
    for invocation in _case_invocations():
        matched |= set(engine.evaluate(invocation).rules)
    assert matched == {rule.id for rule in engine.policy.rules}


def test_done_when_an_export_over_data_derived_from_phi_shows_every_rule_and_the_winner() -> None:
    engine = PolicyEngine(load_policy(DEMO_POLICY))
    export = {"tool": "export_report", "args": {"dataset": "monthly_summary"}}
    research = engine.evaluate(
        Invocation(**export, agent="analytics-agent", team="research", data=["monthly_summary"])
    )
    assert research.outcome == "require_approval"
    assert set(research.rules) == {"reports-permit", "phi-export-approval", "ciso-notify"}
    assert research.winner == "phi-export-approval"
    assert research.conflicts and "reports-permit" in research.conflicts[0]
    assert [(o.rule, o.within_s) for o in research.obligations] == [("ciso-notify", 600)]
    text = "\n".join(research.explanation)
    assert "derived from" in text and "patients" in text  # lineage is explained

    compliance = engine.evaluate(
        Invocation(**export, agent="compliance-agent", team="compliance", data=["monthly_summary"])
    )
    assert compliance.outcome == "require_approval"
    assert compliance.obligations == []
    assert [(w.obligation_rule, w.by) for w in compliance.waived] == [
        ("ciso-notify", "compliance-dispensation")
    ]


# ------------------------------------------------------------- real demo agents on the policy


@dataclass
class PolicyDemo:
    url: str
    operator: str
    db: Path
    board: Path
    log: Path
    queue: str

    def env(self) -> dict[str, str]:
        return {"IRQ_URL": self.url, "IRQ_TOKEN": self.operator}

    def enqueue(self, kind: str, workflow_id: str) -> str:
        from dbos import DBOSClient

        from console.demo.dbos.agents import APP_VERSION, WORKFLOW_NAME
        from console.demo.dbos.plans import KINDS, plan_for

        lane = [name for name, _ in KINDS].index(kind)
        plan = plan_for(
            lane,
            1,
            board=str(self.board),
            log=str(self.log),
            step_scale=0.1,
            interval_s=0.5,
            guarded=True,
        )
        client = DBOSClient(system_database_url=f"sqlite:///{self.db}")
        try:
            client.enqueue(
                {
                    "queue_name": self.queue,
                    "workflow_name": WORKFLOW_NAME,
                    "workflow_id": workflow_id,
                    "app_version": APP_VERSION,
                },
                plan,
            )
        finally:
            client.destroy()
        return workflow_id

    def steps(self, wid: str, step: str) -> list[dict[str, Any]]:
        from console.demo.dbos.reservations import read_log

        return [
            e
            for e in read_log(self.log)
            if e.get("wid") == wid and e.get("event") == "step" and e.get("step") == step
        ]


def eventually(check: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


@pytest.fixture
def policy_demo(irq_home: Path) -> Iterator[PolicyDemo]:
    """A guarded demo worker (its own queue, no lanes) and ``irq serve --policy`` (the demo's)."""
    from console.gateway.auth import create_token
    from console.model import Role

    db = irq_home / "fleet.db"
    port = free_port()
    queue = f"q-{uuid.uuid4().hex[:6]}"
    demo = PolicyDemo(
        f"ws://127.0.0.1:{port}",
        create_token(Role.OPERATOR, "demo-policy-operator", irq_home),
        db,
        irq_home / "board",
        irq_home / "exec.jsonl",
        queue,
    )
    agent_token = create_token(Role.AGENT, "demo-policy-agent", irq_home, scopes=("dbos:local",))
    children: list[subprocess.Popen[bytes]] = []
    logs = [open(irq_home / name, "ab") for name in ("worker.log", "serve.log")]  # noqa: SIM115
    try:
        worker = subprocess.Popen(
            [sys.executable, "-m", "console.demo.dbos.worker", "--db", str(db),
             "--executor-id", "policy-demo", "--queue", queue, "--queue-poll", "0.2",
             "--board", str(demo.board), "--log", str(demo.log), "--guarded", "--watch-parent"],
            cwd=ROOT, stdout=logs[0], stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "IRQ_HOME": str(irq_home),
                 "IRQ_AGENT_URL": f"{demo.url}/agent", "IRQ_AGENT_TOKEN": agent_token,
                 "IRQ_AGENT_CONTEXT": DEMO_AGENT_CONTEXT},
        )  # fmt: skip
        children.append(worker)
        eventually(
            lambda: b"ready (pid" in (irq_home / "worker.log").read_bytes() or worker.poll(),
            "the demo worker",
        )
        assert worker.poll() is None, (irq_home / "worker.log").read_text()
        gateway = subprocess.Popen(
            [sys.executable, "-m", "console.cli.app", "serve", "--port", str(port),
             "--policy", str(DEMO_POLICY), "--backend", dbos_backend_url(db) + "?poll=0.3"],
            cwd=ROOT, stdout=logs[1], stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "IRQ_HOME": str(irq_home)},
        )  # fmt: skip
        children.append(gateway)
        eventually(
            lambda: gateway.poll() is not None or gateway_ready(demo.url, demo.operator),
            "irq serve --policy",
        )
        assert gateway.poll() is None, (irq_home / "serve.log").read_text()
        yield demo
    finally:
        for child in reversed(children):
            stop_process(child)
        for log in logs:
            log.close()


def _inbox(demo: PolicyDemo) -> list[dict[str, Any]]:
    out = irq("inbox", "-o", "json", env=demo.env())
    assert out.code == 0, out.stderr
    listed: list[dict[str, Any]] = json.loads(out.stdout)
    return listed


def _obligations(demo: PolicyDemo, run_id: str) -> list[dict[str, Any]]:
    out = irq("obligations", "--run", run_id, "-o", "json", env=demo.env())
    assert out.code == 0, out.stderr
    return [o for o in json.loads(out.stdout) if o["run_id"] == run_id]


@pytest.mark.slow
def test_the_demo_agents_phi_exports_meet_the_policy(policy_demo: PolicyDemo) -> None:
    demo = policy_demo
    analytics = demo.enqueue("analytics", "analytics-policy-0001")
    compliance = demo.enqueue("compliance", "compliance-policy-0001")

    # both exports wait in the inbox, each naming the rule that asked
    def waiting() -> dict[str, dict[str, Any]] | None:
        items = {i["run_id"].rsplit("/", 1)[-1]: i for i in _inbox(demo)}
        return items if {analytics, compliance} <= items.keys() else None

    items = eventually(waiting, "both exports in the inbox", timeout=90)
    for wid in (analytics, compliance):
        item = items[wid]
        assert item["action"] == "export_report"
        assert item["args"]["dataset"] == "monthly_summary"
        assert item["policy"]["rule"] == "phi-export-approval"
        assert not demo.steps(wid, "export report")  # nothing ran before the approval

    # approving the analytics agent's export runs the tool once and opens the CISO obligation
    approved = irq("approve", items[analytics]["id"], "--reason", "monthly", "--yes",
                   env=demo.env())  # fmt: skip
    assert approved.code == 0, approved.stdout + approved.stderr
    eventually(lambda: demo.steps(analytics, "publish report"), "the analytics report published")
    assert len(demo.steps(analytics, "export report")) == 1
    (opened,) = eventually(lambda: _obligations(demo, items[analytics]["run_id"]),
                           "the CISO obligation")  # fmt: skip
    assert (opened["rule"], opened["what"], opened["state"]) == (
        "ciso-notify",
        "notify the CISO",
        "open",
    )
    created = datetime.fromisoformat(opened["created_at"])
    due = datetime.fromisoformat(opened["due_at"])
    assert (due - created).total_seconds() == pytest.approx(600, abs=1)
    listing = irq("obligations", env=demo.env())
    assert listing.code == 0 and "ciso-notify" in listing.stdout, listing.stderr

    # the compliance agent's: the same export, the obligation waived by the dispensation
    approved = irq("approve", items[compliance]["id"], "--reason", "audit", "--yes",
                   env=demo.env())  # fmt: skip
    assert approved.code == 0, approved.stdout + approved.stderr
    (waived,) = eventually(lambda: _obligations(demo, items[compliance]["run_id"]),
                           "the waived obligation")  # fmt: skip
    assert (waived["rule"], waived["state"], waived["by"]) == (
        "ciso-notify",
        "waived",
        "compliance-dispensation",
    )
    assert len(demo.steps(compliance, "export report")) == 1


@pytest.mark.slow
def test_the_demo_policy_governs_the_operators_of_a_drop_and_a_prod_deploy(
    policy_demo: PolicyDemo, irq_home: Path
) -> None:
    from console.gateway.auth import create_token
    from console.model import Role

    demo = policy_demo
    admin = {**demo.env(), "IRQ_TOKEN": create_token(Role.ADMIN, "demo-admin", irq_home)}
    second = {**demo.env(), "IRQ_TOKEN": create_token(Role.OPERATOR, "second-op", irq_home)}
    janitor = demo.enqueue("db-janitor", "db-janitor-policy-0001")
    release = demo.enqueue("release-train", "release-train-policy-0001")

    def waiting() -> dict[str, dict[str, Any]] | None:
        items = {i["run_id"].rsplit("/", 1)[-1]: i for i in _inbox(demo)}
        return items if {janitor, release} <= items.keys() else None

    items = eventually(waiting, "the drop and the deploy in the inbox", timeout=90)

    # the backup deletion was refused by the policy and never ran; the drop waits for an admin
    assert not demo.steps(janitor, "prune old backup")
    drop = items[janitor]
    assert (drop["action"], drop["policy"]["rule"]) == ("drop_table", "drop-table-admin")
    refused = irq("approve", drop["id"], "--reason", "stale", "--yes", env=demo.env())
    assert refused.code == 5, refused.stdout + refused.stderr
    assert "drop-table-admin" in refused.stdout + refused.stderr
    approved = irq("approve", drop["id"], "--reason", "stale", "--yes", env=admin)
    assert approved.code == 0, approved.stdout + approved.stderr
    eventually(lambda: demo.steps(janitor, "vacuum"), "the table dropped, then vacuumed")
    assert len(demo.steps(janitor, "drop table")) == 1
    shown = irq("show", janitor, "-o", "json", env=demo.env())
    decisions = json.loads(shown.stdout)["policy_decisions"]
    assert ("delete_backup", "prohibit", "backup-never-deleted") in {
        (d["tool"], d["outcome"], d["winner"]) for d in decisions
    }

    # the deploy holds a prod lock: a cancel without a reason is refused, naming the rule
    cancel = irq("cancel", release, "--yes", env=demo.env())
    assert cancel.code == 5, cancel.stdout + cancel.stderr
    assert "cancel-prod-lock-needs-reason" in cancel.stdout + cancel.stderr
    # four eyes: the first approval is recorded, the same person again refused, a second delivers
    deploy = items[release]
    assert (deploy["policy"]["rule"], deploy["policy"]["approvers"]) == (
        "prod-deploy-four-eyes",
        2,
    )
    first = irq("approve", deploy["id"], "--reason", "ship", "--yes", env=demo.env())
    assert first.code == 0 and "recorded" in first.stdout, first.stdout + first.stderr
    again = irq("approve", deploy["id"], "--reason", "ship", "--yes", env=demo.env())
    assert again.code == 5, again.stdout + again.stderr
    assert not demo.steps(release, "deploy canary")
    delivered = irq("approve", deploy["id"], "--reason", "ship", "--yes", env=second)
    assert delivered.code == 0, delivered.stdout + delivered.stderr
    eventually(lambda: demo.steps(release, "verify metrics"), "the deploy verified")
    assert len(demo.steps(release, "deploy canary")) == 1
