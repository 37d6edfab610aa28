"""A decision is a mutation: on a terminal it shows what will be decided and asks (default
No); ``--dry-run`` shows and exits 0; without a terminal and without ``--yes`` it refuses
with exit 2. Against a real DBOS agent (the fixture of the CLI end-to-end test), reading
what the agent itself received."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_harness import CountingForwarder, irq, on_a_terminal
from test_cli_with_dbos_agent import INTERRUPT_ID, Fleet, eventually, fleet  # noqa: F401

pytestmark = [pytest.mark.slow]


def _pending(env: dict[str, str]) -> dict[str, object] | None:
    out = irq("inbox", "--all", "-o", "json", env=env)
    assert out.code == 0, out.stderr
    found = [i for i in json.loads(out.stdout) if i["id"] == INTERRUPT_ID]
    return found[0] if found else None


def _decide_audited(env: dict[str, str]) -> list[dict[str, object]]:
    out = irq("audit", "--target", INTERRUPT_ID, "-o", "json", env=env)
    assert out.code == 0, out.stderr
    return [e for e in json.loads(out.stdout) if e["action"] in ("decide", "approve")]


def test_a_decision_shows_what_it_decides_and_asks_before_acting(fleet: Fleet):  # noqa: F811
    env = fleet.env()
    interrupt = eventually(lambda: _pending(env), "the interrupt in the inbox")
    assert interrupt["status"] == "pending"

    # no terminal, no --yes: refused before anything is sent
    refused = irq("approve", INTERRUPT_ID, env=env)
    assert refused.code == 2
    assert "refusing to approve an interrupt without confirmation" in refused.stderr
    assert "--yes" in refused.stderr

    # --dry-run shows run, title, action, arguments, allowed decisions; exits 0
    dry = irq("approve", "wf-cli-1/1", "--dry-run", env=env)
    assert dry.code == 0, dry.stderr
    for expected in (
        INTERRUPT_ID,
        "dbos:local/wf-cli-1",
        "Deploy to prod?",
        "deploy",
        '"env": "prod"',
        "approve, edit, reject",
    ):
        assert expected in dry.stdout, (expected, dry.stdout)

    # an edit's dry run is a diff against the proposed arguments; JSON carries the decision
    edit = irq(
        "edit", "wf-cli-1/1", "--merge", "--args", '{"env": "staging"}', "--dry-run", env=env
    )
    assert edit.code == 0, edit.stderr
    assert '-  "env": "prod"' in edit.stdout and '+  "env": "staging"' in edit.stdout
    as_json = irq(
        "edit",
        "wf-cli-1/1",
        "--merge",
        "--args",
        '{"env": "staging"}',
        "--dry-run",
        "-o",
        "json",
        env=env,
    )
    assert as_json.code == 0, as_json.stderr
    preview = json.loads(as_json.stdout)
    assert preview["target"] == INTERRUPT_ID
    assert preview["decision"] == {"kind": "edit", "args": {"env": "staging"}}
    assert preview["interrupt"]["args"] == {"env": "prod"}

    # on a terminal: the same summary, then a question whose default is No
    code, screen = on_a_terminal("approve", "wf-cli-1/1", "--reason", "no", env=env, answer="")
    assert code == 1, screen
    assert "Deploy to prod?" in screen and "approve, edit, reject" in screen
    assert "approve this interrupt? [y/N]" in screen
    assert "nothing done" in screen
    # nothing was sent: the CLI exited before its command, so the gateway's state is final
    assert _pending(env)["status"] == "pending"
    assert _decide_audited(env) == []
    assert not [e for e in fleet.agent_events() if e["event"] == "decision"]

    # answering yes decides, exactly once, and the agent receives it -- over one connection
    # (preview, question and command share it and its one snapshot)
    forwarder = CountingForwarder(env["IRQ_URL"])
    try:
        code, screen = on_a_terminal(
            "approve", "wf-cli-1/1", "--reason", "ok", env={**env, "IRQ_URL": forwarder.url},
            answer="y",
        )
    finally:
        forwarder.close()
    assert code == 0, screen
    assert forwarder.connections == 1, screen
    assert "applied" in screen
    decisions = eventually(
        lambda: [e for e in fleet.agent_events() if e["event"] == "decision"],
        "the agent to receive the approval",
    )
    assert decisions == [decisions[0]] and decisions[0]["approved"] is True
    assert _pending(env)["status"] == "decided"


def test_decisions_in_a_read_only_context_refuse_even_with_yes(irq_home: Path):
    from console.config import Config, Context, save_config
    from console.processes import free_port

    url = f"ws://127.0.0.1:{free_port()}"
    save_config(Config(current_context="ro", contexts={"ro": Context("ro", url, read_only=True)}))
    for args in (
        ["approve", INTERRUPT_ID, "--yes"],
        ["reject", INTERRUPT_ID, "--feedback", "no", "--yes"],
        ["respond", INTERRUPT_ID, "--text", "x", "--yes"],
        ["edit", INTERRUPT_ID, "--args", "{}", "--yes"],
    ):
        result = irq(*args)
        assert result.code == 5, (args, result)
        assert "read-only" in result.stderr
