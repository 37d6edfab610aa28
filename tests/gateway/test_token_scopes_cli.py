"""``irq token create --role agent`` asks for a scope; the scope is stored and listed, and
a gateway enforces it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from console.gateway.auth import AgentScope, TokenStore, tokens_path


def _irq(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console.cli.app", *args],
                          env={**os.environ, "IRQ_HOME": str(home), "NO_COLOR": "1"},
                          capture_output=True, text=True, timeout=60)


def test_an_agent_token_needs_a_scope_and_keeps_it(tmp_path: Path):
    missing = _irq(tmp_path, "token", "create", "--role", "agent")
    assert missing.returncode == 2 and "--scope" in missing.stderr
    bad = _irq(tmp_path, "token", "create", "--role", "agent", "--scope", "dbos")
    assert bad.returncode == 2 and "BACKEND:CONTEXT" in bad.stderr
    wrong_role = _irq(tmp_path, "token", "create", "--role", "operator", "--scope", "dbos:local")
    assert wrong_role.returncode == 2 and "agent tokens" in wrong_role.stderr
    assert not tokens_path(tmp_path).exists()

    made = _irq(tmp_path, "token", "create", "--role", "agent", "--name", "fleet", "--scope",
                "dbos:local", "--scope", "temporal:prod/nightly-", "-o", "json")
    assert made.returncode == 0, made.stderr
    record = json.loads(made.stdout)
    assert record["scopes"] == ["dbos:local", "temporal:prod/nightly-"]
    principal = TokenStore(tokens_path(tmp_path)).authenticate(record["token"])
    assert principal is not None and principal.scopes == (
        AgentScope("dbos", "local"), AgentScope("temporal", "prod", "nightly-"))
    assert principal.may_report("temporal", "prod", "nightly-7")
    assert not principal.may_report("temporal", "prod", "daily-7")
    assert not principal.may_report("dbos", "prod", "x")

    listed = _irq(tmp_path, "token", "list", "-o", "json")
    assert json.loads(listed.stdout)[0]["scopes"] == ["dbos:local", "temporal:prod/nightly-"]


def test_an_old_unscoped_agent_entry_still_authenticates_as_unscoped(tmp_path: Path):
    from console.gateway.auth import create_token
    from console.model import Role

    token = create_token(Role.AGENT, "old", tmp_path)  # the entry has no "scopes" field
    entry = json.loads(tokens_path(tmp_path).read_text())[0]
    assert "scopes" not in entry
    principal = TokenStore(tokens_path(tmp_path)).authenticate(token)
    assert principal is not None and principal.scopes is None
    assert principal.may_report("dbos", "anything", "x")
