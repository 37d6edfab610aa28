"""``irq policy show|check|explain|test|reload``, ``irq obligations`` and ``irq obligation
fulfil|waive``: against a real gateway started as ``irq serve --policy FILE`` (one per module),
and ``irq policy test`` locally, with no gateway at all.

The policy is the issue's "Done when" case in small: a report tool class with a general
permit, an approval rule for exporting PHI, a CISO obligation after touching PHI that the
compliance team is dispensed from, and a lineage monthly_summary <- cohort_stats <- patients
(PHI). Obligations reach the gateway as an agent's helper sends them: ``policy_event`` frames
on the agent channel.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cli_harness import ENV_VARS, ROOT, ServedGateway, gateway_ready, irq
from test_decision_confirmation import on_a_terminal
from test_shell_completion import complete

from console.processes import free_port, stop_process

POLICY = """\
default = "permit"

[tool_classes]
reporting = []
data_access = []
db_admin = []

[tools]
export_report = ["reporting"]
read_dataset = ["data_access"]
delete_backup = ["db_admin"]

[data_classes]
data = []
sensitive = ["data"]
phi = ["sensitive"]

[datasets.patients]
classes = ["phi"]

[datasets.cohort_stats]
derived_from = ["patients"]

[datasets.monthly_summary]
derived_from = ["cohort_stats"]

[[rules]]
id = "reports-permit"
modality = "permit"
action = ["reporting"]
description = "report tools may run"

[[rules]]
id = "phi-export-approval"
modality = "require_approval"
action = ["export_report"]
object = ["phi"]
description = "exporting a report over PHI needs approval"

[[rules]]
id = "ciso-notify"
modality = "oblige"
action = ["read_dataset", "export_report"]
object = ["phi"]
what = "notify the CISO"
within_s = 600

[[rules]]
id = "compliance-dispensation"
modality = "dispense"
teams = ["compliance"]
action = ["read_dataset", "export_report"]
object = ["phi"]
waives = ["ciso-notify"]

[[rules]]
id = "backup-never-deleted"
modality = "prohibit"
action = ["delete_backup"]
priority = 100

[[rules]]
id = "cancel-needs-reason"
on = "command"
modality = "prohibit"
action = ["cancel"]
condition = 'cmd.reason == ""'
description = "a cancel says why"
"""

EXPORT = ("--tool", "export_report", "--args", '{"dataset": "monthly_summary"}')
OUTSIDER = ("--agent", "analytics-agent", "--team", "research", "--data", "monthly_summary")
RUN_ID = "dbos:local/wf-policy-1"


# ------------------------------------------------------------------------ irq policy test


def _cases(policy: str, cases: str) -> str:
    return f'policy = "{policy}"\n\n{cases}'


PASSING_CASES = """\
[[cases]]
name = "an outsider's PHI export needs approval and obliges"
expect_outcome = "require_approval"
expect_winner = "phi-export-approval"
expect_obligations = ["ciso-notify"]
[cases.invocation]
tool = "export_report"
agent = "analytics-agent"
team = "research"
data = ["monthly_summary"]

[[cases]]
name = "a backup is never deleted"
expect_outcome = "prohibit"
expect_winner = "backup-never-deleted"
[cases.invocation]
tool = "delete_backup"
"""

FAILING_CASE = """\
[[cases]]
name = "wrongly expects a permit"
expect_outcome = "permit"
[cases.invocation]
tool = "delete_backup"
"""


@pytest.fixture
def policy_dir(tmp_path: Path) -> Path:
    (tmp_path / "policy.toml").write_text(POLICY)
    return tmp_path


def test_policy_test_passes_every_case_and_exits_0(policy_dir: Path):
    cases = policy_dir / "cases.toml"
    cases.write_text(_cases("policy.toml", PASSING_CASES))
    out = irq("policy", "test", str(cases))
    assert out.code == 0, out.stdout + out.stderr
    assert "PASS" in out.stdout and "FAIL" not in out.stdout
    assert "an outsider's PHI export needs approval and obliges" in out.stdout
    assert "2 passed, 0 failed" in out.stdout


def test_policy_test_names_the_failed_case_with_its_reason_and_exits_1(policy_dir: Path):
    cases = policy_dir / "cases.toml"
    cases.write_text(_cases("policy.toml", PASSING_CASES + "\n" + FAILING_CASE))
    out = irq("policy", "test", str(cases))
    assert out.code == 1, out.stdout + out.stderr
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("FAIL")]
    assert "wrongly expects a permit" in line and "prohibit" in line  # what it got instead
    assert "2 passed, 1 failed" in out.stdout

    as_json = irq("policy", "test", str(cases), "-o", "json")
    assert as_json.code == 1
    document = json.loads(as_json.stdout)
    assert [c["passed"] for c in document["cases"]] == [True, True, False]


def test_policy_test_refuses_an_invalid_policy_with_file_rule_and_key(policy_dir: Path):
    broken = POLICY.replace(
        'object = ["phi"]\ndescription = "exporting',
        'object = ["phi"]\ncondition = "args.amount >"\ndescription = "exporting',
        1,
    )
    (policy_dir / "policy.toml").write_text(broken)
    cases = policy_dir / "cases.toml"
    cases.write_text(_cases("policy.toml", PASSING_CASES))
    out = irq("policy", "test", str(cases))
    assert out.code == 2, out.stdout + out.stderr
    assert "policy.toml" in out.stderr
    assert "phi-export-approval" in out.stderr and "condition" in out.stderr
    assert "Traceback" not in out.stderr


def test_without_a_policy_show_says_so_and_check_is_not_found(served_gateway: ServedGateway):
    env = served_gateway.env(served_gateway.viewer)
    shown = irq("policy", "show", "-o", "json", env=env)
    assert shown.code == 0, shown.stderr
    assert json.loads(shown.stdout)["policy"] is None
    text = irq("policy", "show", env=env)
    assert "no policy loaded" in text.stderr and "irq serve --policy FILE" in text.stderr
    checked = irq("policy", "check", "--tool", "export_report", env=env)
    assert checked.code == 3, checked.stdout + checked.stderr
    assert "no policy" in checked.stderr


def test_policy_check_refuses_args_that_are_not_a_json_object_before_connecting(irq_home: Path):
    env = {"IRQ_URL": f"ws://127.0.0.1:{free_port()}"}  # nobody listens: never reached
    out = irq("policy", "check", "--tool", "export_report", "--args", "{dataset:", env=env)
    assert out.code == 2
    assert "--args is not valid JSON" in out.stderr
    out = irq("policy", "check", "--tool", "export_report", "--args", "[1, 2]", env=env)
    assert out.code == 2
    assert "--args must be a JSON object" in out.stderr


# --------------------------------------------------------------- a gateway with a policy


@dataclass
class PolicyGateway:
    url: str
    home: Path
    policy: Path
    operator: str
    viewer: str
    admin: str
    agent: str
    process: subprocess.Popen[bytes]

    def env(self, token: str) -> dict[str, str]:
        return {"IRQ_URL": self.url, "IRQ_TOKEN": token, "IRQ_HOME": str(self.home)}


def _start(home: Path, policy: Path) -> PolicyGateway:
    from console.gateway.auth import create_token
    from console.model import Role

    tokens = {
        role: create_token(role, f"{role.value}-test", home)
        for role in (Role.OPERATOR, Role.VIEWER, Role.ADMIN, Role.AGENT)
    }
    port = free_port()
    log = home / "serve.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "console.cli.app",
                "serve",
                "--port",
                str(port),
                "--policy",
                str(policy),
                # a DBOS context the obligations' run belongs to (no database: never polled)
                "--backend",
                f"dbos+sqlite:///{home}/no-such-dir/dbos.db?context=local&poll=60",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "IRQ_HOME": str(home)},
            cwd=ROOT,
        )
    url = f"ws://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"irq serve exited {proc.returncode}:\n{log.read_text()}")
        if gateway_ready(url, tokens[Role.OPERATOR]):
            return PolicyGateway(
                url,
                home,
                policy,
                tokens[Role.OPERATOR],
                tokens[Role.VIEWER],
                tokens[Role.ADMIN],
                tokens[Role.AGENT],
                proc,
            )
        time.sleep(0.1)
    stop_process(proc)
    raise RuntimeError(f"irq serve --policy did not answer within 30s:\n{log.read_text()}")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PolicyGateway]:
    home = tmp_path_factory.mktemp("policy-home")
    policy = home / "policy.toml"
    policy.write_text(POLICY)
    with pytest.MonkeyPatch.context() as mp:
        for var in ENV_VARS:
            mp.delenv(var, raising=False)
        mp.setenv("IRQ_HOME", str(home))
        gw = _start(home, policy)
        try:
            yield gw
        finally:
            stop_process(gw.process)


def _obligation(call_id: str, *, state: str = "open", by: str = "") -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "id": f"{RUN_ID}#{call_id}/ciso-notify",
        "rule": "ciso-notify",
        "run_id": RUN_ID,
        "what": "notify the CISO",
        "created_at": now.isoformat(),
        "due_at": (now + timedelta(seconds=600)).isoformat(),
        "state": state,
        "by": by,
        "tool": "export_report",
    }


def report_obligations(gw: PolicyGateway, obligations: list[dict[str, Any]]) -> None:
    """Send the obligations as the agent's helper does (``policy_event`` frames on /agent);
    a ping after them: its pong says they were read."""
    from websockets.asyncio.client import connect

    async def send() -> None:
        headers = {"Authorization": f"Bearer {gw.agent}"}
        async with connect(gw.url + "/agent", additional_headers=headers) as ws:
            await ws.send(json.dumps({"type": "hello", "protocol": 1, "client": "test"}))
            for obligation in obligations:
                frame = {
                    "type": "policy_event",
                    "event": "obligation",
                    "backend": "dbos",
                    "context": "local",
                    "native_id": "wf-policy-1",
                    "obligation": obligation,
                }
                await ws.send(json.dumps(frame))
            await ws.send(json.dumps({"type": "ping", "id": "sent"}))
            while True:
                reply = json.loads(await asyncio.wait_for(ws.recv(), 10))
                assert reply.get("type") != "error", reply
                if reply == {"type": "pong", "id": "sent"}:
                    return

    asyncio.run(send())


def listed(gw: PolicyGateway, *args: str) -> dict[str, dict[str, Any]]:
    out = irq("obligations", *args, "-o", "json", env=gw.env(gw.viewer))
    assert out.code == 0, out.stderr
    return {o["id"]: o for o in json.loads(out.stdout)}


def until_listed(gw: PolicyGateway, obligation_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = listed(gw).get(obligation_id)
        if found is not None:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{obligation_id} never listed")


def test_policy_show_prints_version_source_and_rules(gateway: PolicyGateway):
    out = irq("policy", "show", "-o", "json", env=gateway.env(gateway.viewer))
    assert out.code == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["version"].startswith("sha256:")
    assert data["source"] == str(gateway.policy)
    ids = [r["id"] for r in data["policy"]["rules"]]
    assert ids == [
        "reports-permit",
        "phi-export-approval",
        "ciso-notify",
        "compliance-dispensation",
        "backup-never-deleted",
        "cancel-needs-reason",
    ]

    text = irq("policy", "show", env={**gateway.env(gateway.viewer), "COLUMNS": "160"})
    assert text.code == 0, text.stderr
    assert data["version"] in text.stdout and str(gateway.policy) in text.stdout
    row = next(x for x in text.stdout.splitlines() if "phi-export-approval" in x)
    assert row.split()[:6] == [
        "phi-export-approval",
        "tool",
        "require_approval",
        "export_report",
        "phi",
        "0",
    ]


def test_check_of_an_outsiders_export_over_data_derived_from_phi(gateway: PolicyGateway):
    version = json.loads(
        irq("policy", "show", "-o", "json", env=gateway.env(gateway.viewer)).stdout
    )["version"]
    out = irq("policy", "check", *EXPORT, *OUTSIDER, "-o", "json", env=gateway.env(gateway.viewer))
    assert out.code == 0, out.stderr
    decision = json.loads(out.stdout)
    assert decision["outcome"] == "require_approval"
    # the dispensation names the compliance team: it does not match an outsider
    assert set(decision["rules"]) == {"reports-permit", "phi-export-approval", "ciso-notify"}
    assert decision["winner"] == "phi-export-approval"
    assert [o["rule"] for o in decision["obligations"]] == ["ciso-notify"]
    assert decision["obligations"][0]["within_s"] == 600
    assert decision["waived"] == []
    assert decision["explanation"] and all(isinstance(x, str) for x in decision["explanation"])
    assert decision["policy_version"] == version
    assert decision["conflicts"]  # the general permit lost to the approval rule

    compliance = irq(
        "policy",
        "check",
        *EXPORT,
        "--agent",
        "compliance-agent",
        "--team",
        "compliance",
        "--data",
        "monthly_summary",
        "-o",
        "json",
        env=gateway.env(gateway.viewer),
    )
    assert compliance.code == 0, compliance.stderr
    waived = json.loads(compliance.stdout)
    assert waived["outcome"] == "require_approval" and waived["obligations"] == []
    assert waived["waived"] == [{"obligation_rule": "ciso-notify", "by": "compliance-dispensation"}]

    text = irq(
        "policy", "check", *EXPORT, *OUTSIDER, env={**gateway.env(gateway.viewer), "COLUMNS": "200"}
    )
    assert text.code == 0, text.stderr
    assert "require_approval" in text.stdout and "notify the CISO" in text.stdout
    assert "irq policy explain --tool export_report" in text.stderr  # the next step


def test_explain_names_every_matched_rule_the_conflict_and_the_winner(gateway: PolicyGateway):
    out = irq(
        "policy",
        "explain",
        *EXPORT,
        *OUTSIDER,
        env={**gateway.env(gateway.viewer), "COLUMNS": "200"},
    )
    assert out.code == 0, out.stderr
    for rule in ("reports-permit", "phi-export-approval", "ciso-notify"):
        assert rule in out.stdout, (rule, out.stdout)
    lines = out.stdout.lower().splitlines()
    assert any("winner" in x and "phi-export-approval" in x for x in lines), out.stdout
    assert any("conflict" in x and "reports-permit" in x for x in lines), out.stdout
    assert "monthly_summary is derived from patients" in out.stdout  # lineage, said
    as_json = json.loads(
        irq(
            "policy", "explain", *EXPORT, *OUTSIDER, "-o", "json", env=gateway.env(gateway.viewer)
        ).stdout
    )
    assert as_json["winner"] == "phi-export-approval"
    assert "phi-export-approval" in as_json["text"]


def test_check_of_an_operator_command_is_made_as_the_caller(gateway: PolicyGateway):
    env = gateway.env(gateway.operator)
    bare = irq("policy", "check", "--command", "cancel", "-o", "json", env=env)
    assert bare.code == 0, bare.stderr
    assert json.loads(bare.stdout)["winner"] == "cancel-needs-reason"
    assert json.loads(bare.stdout)["outcome"] == "prohibit"
    given = irq("policy", "check", "--command", "cancel", "-r", "stuck", "-o", "json", env=env)
    assert json.loads(given.stdout)["outcome"] == "permit"

    prose = irq("policy", "explain", "--command", "cancel", env={**env, "COLUMNS": "200"})
    assert prose.code == 0, prose.stderr
    assert "operator-test" in prose.stdout and "cancel-needs-reason" in prose.stdout

    mixed = irq("policy", "check", "--command", "cancel", "--data", "phi", env=env)
    assert mixed.code == 2 and "--data" in mixed.stderr
    neither = irq("policy", "check", env=env)
    assert neither.code == 2 and "--tool" in neither.stderr


def test_obligations_list_then_fulfil_and_waive_with_yes(gateway: PolicyGateway):
    opened, other = _obligation("call-1"), _obligation("call-2")
    report_obligations(gateway, [opened, other])
    found = until_listed(gateway, opened["id"])
    assert {"id", "rule", "run_id", "what", "created_at", "due_at", "state", "by"} <= set(found)
    assert found["state"] == "open" and found["run_id"] == RUN_ID
    assert opened["id"] in listed(gateway, "--state", "open", "--run", RUN_ID)
    assert opened["id"] not in listed(gateway, "--state", "fulfilled")

    table = irq("obligations", env={**gateway.env(gateway.viewer), "COLUMNS": "240"})
    assert table.code == 0, table.stderr
    row = next(x for x in table.stdout.splitlines() if opened["id"] in x)
    assert "open" in row and "notify the CISO" in row and " in 9m" in row

    done = irq(
        "obligation",
        "fulfil",
        opened["id"],
        "--note",
        "mailed the CISO",
        "--yes",
        "-o",
        "json",
        env=gateway.env(gateway.operator),
    )
    assert done.code == 0, done.stdout + done.stderr
    (result,) = json.loads(done.stdout)
    assert result["outcome"] == "applied" and result["target"] == opened["id"]
    after = listed(gateway)[opened["id"]]
    assert after["state"] == "fulfilled" and after["by"] == "operator-test"
    assert after["note"] == "mailed the CISO"

    again = irq(
        "obligation",
        "fulfil",
        opened["id"],
        "--note",
        "twice",
        "--yes",
        env=gateway.env(gateway.operator),
    )
    assert again.code == 4, again.stdout + again.stderr  # conflict: not open any more

    # the short form RUN_NATIVE#CALL/RULE names it too
    waive = irq(
        "obligation",
        "waive",
        "wf-policy-1#call-2/ciso-notify",
        "--note",
        "covered by the incident report",
        "--yes",
        env=gateway.env(gateway.operator),
    )
    assert waive.code == 0, waive.stdout + waive.stderr
    assert listed(gateway)[other["id"]]["state"] == "waived"


def test_settling_an_obligation_without_a_terminal_or_as_a_viewer_is_refused(
    gateway: PolicyGateway,
):
    pending = _obligation("call-3")
    report_obligations(gateway, [pending])
    until_listed(gateway, pending["id"])

    no_tty = irq(
        "obligation", "fulfil", pending["id"], "--note", "done", env=gateway.env(gateway.operator)
    )
    assert no_tty.code == 2
    assert "without confirmation" in no_tty.stderr and "--yes" in no_tty.stderr

    viewer = irq(
        "obligation",
        "waive",
        pending["id"],
        "--note",
        "no",
        "--yes",
        env=gateway.env(gateway.viewer),
    )
    assert viewer.code == 5, viewer.stdout + viewer.stderr

    dry = irq(
        "obligation",
        "fulfil",
        pending["id"],
        "--note",
        "done",
        "--dry-run",
        "-o",
        "json",
        env=gateway.env(gateway.operator),
    )
    assert dry.code == 0, dry.stderr
    assert json.loads(dry.stdout)["obligation"]["state"] == "open"
    assert listed(gateway)[pending["id"]]["state"] == "open"  # nothing was sent


def test_open_obligation_ids_complete_in_the_shell(gateway: PolicyGateway):
    pending, settled = _obligation("call-tab-1"), _obligation("call-tab-2")
    report_obligations(gateway, [pending, settled])
    until_listed(gateway, settled["id"])
    waived = irq(
        "obligation",
        "waive",
        settled["id"],
        "--note",
        "n/a",
        "--yes",
        env=gateway.env(gateway.operator),
    )
    assert waived.code == 0, waived.stderr
    words = complete("irq obligation fulfil wf-policy-1#call-tab", gateway.env(gateway.viewer))
    assert words.returncode == 0 and words.stderr == "", words
    assert words.stdout.split() == ["wf-policy-1#call-tab-1/ciso-notify"]  # open ones only


def test_on_a_terminal_fulfil_shows_the_obligation_and_asks_default_no(gateway: PolicyGateway):
    pending = _obligation("call-4")
    report_obligations(gateway, [pending])
    until_listed(gateway, pending["id"])
    args = ("obligation", "fulfil", pending["id"], "--note", "called the CISO")
    code, seen = on_a_terminal(*args, env=gateway.env(gateway.operator), answer="")
    assert code == 1, seen
    assert "notify the CISO" in seen and "called the CISO" in seen and "nothing done" in seen
    assert listed(gateway)[pending["id"]]["state"] == "open"

    code, seen = on_a_terminal(*args, env=gateway.env(gateway.operator), answer="y")
    assert code == 0, seen
    assert listed(gateway)[pending["id"]]["state"] == "fulfilled"


def test_reload_is_an_admin_command_that_loads_the_changed_file(gateway: PolicyGateway):
    before = json.loads(
        irq("policy", "show", "-o", "json", env=gateway.env(gateway.viewer)).stdout
    )["version"]
    as_operator = irq("policy", "reload", "--yes", env=gateway.env(gateway.operator))
    assert as_operator.code == 5, as_operator.stdout + as_operator.stderr

    no_tty = irq("policy", "reload", env=gateway.env(gateway.admin))
    assert no_tty.code == 2 and "without confirmation" in no_tty.stderr

    gateway.policy.write_text(POLICY.replace("priority = 100", "priority = 90"))
    try:
        out = irq("policy", "reload", "--yes", "-o", "json", env=gateway.env(gateway.admin))
        assert out.code == 0, out.stdout + out.stderr
        assert json.loads(out.stdout)[0]["outcome"] == "applied"
        after = json.loads(
            irq("policy", "show", "-o", "json", env=gateway.env(gateway.viewer)).stdout
        )
        assert after["version"] != before
        prio = {r["id"]: r["priority"] for r in after["policy"]["rules"]}
        assert prio["backup-never-deleted"] == 90
    finally:
        gateway.policy.write_text(POLICY)
