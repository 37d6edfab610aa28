"""The gateway's policy file: every agent gets it after its hello, an edit reaches connected
agents and clients without dropping anyone, a broken edit keeps the old policy and says which
rule and key are wrong, and ``policy_check`` answers with the engine's decision."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from policy_fixtures import BROKEN_CONDITION, POLICY, client, until
from websockets.asyncio.client import connect

from console.gateway.auth import create_token
from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings
from console.model import Role

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class PolicyGateway:
    gateway: Gateway
    url: str
    policy: Path
    tokens: dict[str, str]


@pytest.fixture
async def policy_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                         ) -> AsyncIterator[PolicyGateway]:
    monkeypatch.setenv("IRQ_HOME", str(tmp_path))
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    tokens = {
        "agent": create_token(Role.AGENT, "agent-a", tmp_path, scopes=["dbos:local"]),
        "operator": create_token(Role.OPERATOR, "ops", tmp_path),
        "admin": create_token(Role.ADMIN, "root", tmp_path),
    }
    missing = tmp_path / "no-such-dir"
    gw = Gateway(GatewaySettings(
        port=0, home=tmp_path, flush_interval_s=0.02, policy_path=policy,
        backends=[f"dbos+sqlite:///{missing}/a.db?context=local&poll=5"]))
    await gw.start()
    try:
        yield PolicyGateway(gw, f"ws://127.0.0.1:{gw.port}", policy, tokens)
    finally:
        await gw.stop()


class AgentConnection:
    def __init__(self, ws: Any) -> None:
        self.ws = ws

    async def next_policy(self, timeout_s: float = 10.0) -> dict[str, object]:
        import asyncio

        while True:
            frame = json.loads(await asyncio.wait_for(self.ws.recv(), timeout_s))
            if frame["type"] == "policy":
                return frame

    async def ping(self) -> None:
        import asyncio

        await self.ws.send(json.dumps({"type": "ping", "id": "alive"}))
        while True:
            frame = json.loads(await asyncio.wait_for(self.ws.recv(), 10))
            if frame == {"type": "pong", "id": "alive"}:
                return


def _agent(url: str, token: str):
    return connect(url + "/agent", additional_headers={"Authorization": f"Bearer {token}"})


async def _hello(ws: Any) -> AgentConnection:
    await ws.send(json.dumps({"type": "hello", "protocol": 1, "client": "test"}))
    return AgentConnection(ws)


async def test_an_agent_gets_the_policy_right_after_its_hello(policy_gateway):
    pg = policy_gateway
    async with _agent(pg.url, pg.tokens["agent"]) as ws:
        agent = await _hello(ws)
        frame = await agent.next_policy()
    assert frame["version"] == pg.gateway.policy.version
    assert frame["version"].startswith("sha256:")
    assert [r["id"] for r in frame["policy"]["rules"]] == [
        "refund-large", "no-backup-delete", "phi-read-notify"]


async def test_without_a_policy_the_agent_is_told_none(gateway):
    token = create_token(Role.AGENT, "agent-x", gateway.home, scopes=["dbos:local"])
    async with _agent(gateway.url, token) as ws:
        frame = await (await _hello(ws)).next_policy()
    assert frame == {"type": "policy", "version": None, "policy": None}
    async with client(gateway.url, gateway.tokens["operator"]) as c:
        answer = await c.query("policy_check", invocation={"tool": "refund"})
    assert answer["type"] == "error" and answer["code"] == "not_found"
    assert answer["message"] == "no policy loaded"


async def test_an_edit_reaches_connected_agents_and_clients_and_nobody_is_dropped(
        policy_gateway):
    pg = policy_gateway
    old = pg.gateway.policy.version
    async with _agent(pg.url, pg.tokens["agent"]) as ws, \
            client(pg.url, pg.tokens["operator"]) as c:
        agent = await _hello(ws)
        assert (await agent.next_policy())["version"] == old
        assert c.snapshot["policy"]["version"] == old
        pg.policy.write_text(POLICY + '\n[[rules]]\nid = "no-drop"\nmodality = "prohibit"\n'
                             'action = ["drop_table"]\n')
        pushed = await agent.next_policy(timeout_s=10)
        assert pushed["version"] != old
        assert "no-drop" in [r["id"] for r in pushed["policy"]["rules"]]
        event = await until(lambda: c.kinds("policy"), "the policy event")
        assert event[-1]["version"] == pushed["version"]
        assert event[-1]["rules"] == 4 and event[-1]["source"] == str(pg.policy)
        await agent.ping()  # both connections are still open and answered
        assert (await c.query("policy"))["data"]["version"] == pushed["version"]


async def test_a_broken_edit_keeps_the_old_policy_and_names_rule_and_key(policy_gateway):
    pg = policy_gateway
    old = pg.gateway.policy.version
    async with _agent(pg.url, pg.tokens["agent"]) as ws, \
            client(pg.url, pg.tokens["operator"]) as c:
        agent = await _hello(ws)
        await agent.next_policy()
        pg.policy.write_text(BROKEN_CONDITION)
        notices = await until(lambda: [n for n in c.kinds("notice") if n["level"] == "error"],
                              "the error notice")
        message = notices[0]["message"]
        assert 'rule "refund-large"' in message and "condition" in message
        assert str(pg.policy) in message and old in message
        answer = (await c.query("policy"))["data"]
        assert answer["version"] == old
        assert 'rule "refund-large": condition' in answer["last_error"]
        decision = (await c.query("policy_check", invocation={
            "tool": "refund", "args": {"amount": 500}}))["data"]
        assert decision["outcome"] == "require_approval"  # the old policy still decides
        await agent.ping()
        assert not c.kinds("policy")
        assert len(notices) == 1  # the same bad content is reported once
        pg.policy.write_text(POLICY.replace("priority = 10", "priority = 20"))
        pushed = await agent.next_policy()
        assert pushed["version"] not in (old, None)
        assert (await c.query("policy"))["data"]["last_error"] is None


async def test_policy_check_answers_with_the_decision(policy_gateway):
    pg = policy_gateway
    async with client(pg.url, pg.tokens["operator"]) as c:
        big = (await c.query("policy_check", invocation={
            "tool": "refund", "args": {"amount": 500}, "agent": "billing-agent"}))["data"]
        read = (await c.query("policy_check", invocation={
            "tool": "read_records", "data": ["patients"]}))["data"]
        bad = await c.query("policy_check", invocation={"args": {}})
        missing = await c.query("policy_check")
    assert big["outcome"] == "require_approval" and big["winner"] == "refund-large"
    assert big["rules"] == ["refund-large"] and big["obligations"] == []
    assert big["policy_version"] == pg.gateway.policy.version
    assert any("refund-large" in line for line in big["explanation"])
    assert big["approval"]["rule"] == "refund-large"
    assert read["outcome"] == "permit" and read["winner"] is None
    assert read["obligations"] == [
        {"rule": "phi-read-notify", "what": "notify the CISO", "within_s": 600.0}]
    assert bad["type"] == "error" and bad["code"] == "invalid" and "tool" in bad["message"]
    assert missing["type"] == "error" and missing["code"] == "invalid"


async def test_policy_reload_is_an_audited_admin_command(policy_gateway):
    pg = policy_gateway
    async with client(pg.url, pg.tokens["operator"]) as ops, \
            client(pg.url, pg.tokens["admin"]) as root:
        refused = await ops.command("policy_reload", ["policy"])
        assert refused["results"][0]["outcome"] == "forbidden"
        same = await root.command("policy_reload", ["policy"], key="reload-1")
        assert same["results"][0]["outcome"] == "applied"
        assert "unchanged" in same["results"][0]["detail"]
        pg.policy.write_text(BROKEN_CONDITION)
        broken = await root.command("policy_reload", ["policy"], key="reload-2")
        result = broken["results"][0]
        assert result["outcome"] == "failed" and result["error"] == "invalid"
        assert 'rule "refund-large": condition' in result["detail"]
        again = await root.command("policy_reload", ["policy"], key="reload-2")
        assert again["results"][0]["replayed"] is True
        wrong = await root.command("policy_reload", ["everything"])
        assert wrong["type"] == "error" and wrong["code"] == "invalid"
        audit = (await root.query("audit", limit=20))["data"]
    reloads = [a for a in audit if a["action"] == "policy_reload"]
    assert {a["outcome"] for a in reloads} >= {"applied", "failed", "forbidden"}


def test_serve_refuses_an_invalid_policy_at_start(tmp_path: Path):
    policy = tmp_path / "policy.toml"
    policy.write_text(BROKEN_CONDITION)
    env = {**os.environ, "IRQ_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "console.cli.app", "serve", "--port", "0", "--backend",
         f"dbos+sqlite:///{tmp_path}/none.db", "--policy", str(policy)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert f'{policy}: rule "refund-large": condition' in done.stderr


def test_the_watcher_parses_only_changed_content_and_reports_a_bad_file_once(tmp_path: Path):
    from console.gateway.policy_state import PolicyState

    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    state = PolicyState(path)
    state.load()
    version = state.version
    assert state.poll() is None  # nothing changed
    os.utime(path, ns=(1, 1))  # touched: same content, not a new policy
    touched = state.poll()
    assert touched is not None and not touched.changed and touched.error is None
    path.write_text(BROKEN_CONDITION)
    refused = state.poll()
    assert refused is not None and 'rule "refund-large": condition' in (refused.error or "")
    assert state.version == version and state.last_error == refused.error
    os.utime(path, ns=(2, 2))
    again = state.poll()
    assert again is not None and again.error is None  # the same bad content: told once
    path.unlink()
    gone = state.poll()
    assert gone is not None and "cannot read the policy file" in (gone.error or "")
    assert state.poll() is None and state.version == version
    path.write_text(POLICY + '\n[[rules]]\nid = "x"\nmodality = "prohibit"\naction = ["x"]\n')
    back = state.poll()
    assert back is not None and back.changed and state.version != version
    assert state.last_error is None
