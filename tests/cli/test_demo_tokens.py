"""``irq demo``'s agent token reports heartbeats for the DBOS fleet's runs only (least
privilege), and an unscoped agent token saved by an older demo is replaced, not reused."""

from __future__ import annotations

import json
from pathlib import Path

from console.demo.launcher import DemoPaths, ensure_tokens
from console.gateway.auth import TokenStore, create_token, tokens_path
from console.model import Role


def test_demo_agent_token_may_report_only_the_demo_backends_local_runs(irq_home: Path):
    paths = DemoPaths(irq_home / "demo")
    paths.root.mkdir()
    agent = TokenStore(tokens_path()).authenticate(ensure_tokens(paths).agent)
    assert agent is not None and agent.role is Role.AGENT
    assert agent.may_report("dbos", "local", "release-train-00-0001")
    assert not agent.may_report("dbos", "prod", "release-train-00-0001")
    # the Temporal worker's policy guard reports decisions and obligations
    assert agent.may_report("temporal", "local", "release-train-0001")
    assert not agent.may_report("temporal", "prod", "release-train-0001")
    assert not agent.may_report("langgraph", "local", "thread-1")
    assert agent.may_report("restate", "local", "inv_1abc")  # the Restate lane's handlers


def test_an_unscoped_agent_token_of_an_older_demo_is_replaced(irq_home: Path):
    paths = DemoPaths(irq_home / "demo")
    paths.root.mkdir()
    operator = create_token(Role.OPERATOR, "demo-operator")
    legacy = create_token(Role.AGENT, "demo-agent")  # no scopes: may report any run
    paths.tokens.write_text(json.dumps({"operator": operator, "agent": legacy}))
    tokens = ensure_tokens(paths)
    assert tokens.operator == operator
    assert tokens.agent != legacy
    assert json.loads(paths.tokens.read_text())["agent"] == tokens.agent
    agent = TokenStore(tokens_path()).authenticate(tokens.agent)
    assert agent is not None and agent.scopes is not None
    assert [str(s) for s in agent.scopes] == ["dbos:local", "restate:local", "temporal:local"]
    assert ensure_tokens(paths) == tokens  # the scoped one is reused
