"""Obligations at the gateway: agents open them (idempotently), fulfil them or have them waived
by a dispensation; operators fulfil or waive them with a note; an open one past its due time
turns overdue with a warning notice; all of it survives a SIGKILL of the gateway; an agent
token cannot touch a run outside its scope."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from agent_wire import AgentWire, agent
from policy_fixtures import POLICY, client, until

from console.gateway.auth import create_token
from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings
from console.model import Role, Run
from tests.support.crashable_gateway import CrashableGateway


@dataclass
class ObligationGateway:
    gateway: Gateway
    url: str
    tokens: dict[str, str]


def _tokens(home: Path) -> dict[str, str]:
    return {
        "agent": create_token(Role.AGENT, "agent-a", home, scopes=["dbos:local"]),
        "team": create_token(Role.AGENT, "team-a", home, scopes=["dbos:local/team-a-"]),
        "operator": create_token(Role.OPERATOR, "ops", home),
        "viewer": create_token(Role.VIEWER, "watcher", home),
    }


@pytest.fixture
async def og(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ObligationGateway]:
    monkeypatch.setenv("IRQ_HOME", str(tmp_path))
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    tokens = _tokens(tmp_path)
    gw = Gateway(GatewaySettings(
        port=0, home=tmp_path, flush_interval_s=0.02, policy_path=policy,
        backends=[f"dbos+sqlite:///{tmp_path}/none/a.db?context=local&poll=5"]))
    await gw.start()
    try:
        yield ObligationGateway(gw, f"ws://127.0.0.1:{gw.port}", tokens)
    finally:
        await gw.stop()


def obligation(native_id: str, call_id: str = "1", *, within_s: float | None = 600,
               state: str = "open", by: str = "", rule: str = "phi-read-notify"
               ) -> dict[str, Any]:
    run_id = f"dbos:local/{native_id}"
    now = datetime.now(UTC)
    ob = {"id": f"{run_id}#{call_id}/{rule}", "rule": rule, "run_id": run_id,
          "what": "notify the CISO", "created_at": now.isoformat(),
          "due_at": (now + timedelta(seconds=within_s)).isoformat() if within_s else None,
          "state": state, "by": by, "tool": "read_records", "policy_version": "sha256:x"}
    return {"type": "policy_event", "event": "obligation", "backend": "dbos",
            "context": "local", "native_id": native_id, "obligation": ob}


def fulfilled(native_id: str, obligation_id: str, note: str) -> dict[str, Any]:
    return {"type": "policy_event", "event": "obligation_fulfilled", "backend": "dbos",
            "context": "local", "native_id": native_id, "id": obligation_id, "note": note}


async def send(wire: AgentWire, frame: dict[str, Any]) -> dict[str, Any] | None:
    return await wire.send_raw(json.dumps(frame))


async def listing(c: Any, **fields: Any) -> list[dict[str, Any]]:
    return (await c.query("obligations", **fields))["data"]


async def test_an_agent_opens_an_obligation_once_and_fulfils_it(og):
    frame = obligation("wf-1")
    ob_id = frame["obligation"]["id"]
    async with agent(og.url, og.tokens["agent"]) as wire, \
            client(og.url, og.tokens["operator"]) as c:
        assert await send(wire, frame) is None
        assert await send(wire, frame) is None  # a replay: same id
        (stored,) = await listing(c)
        assert stored["state"] == "open" and stored["id"] == ob_id
        assert stored["what"] == "notify the CISO" and stored["rule"] == "phi-read-notify"
        assert await send(wire, fulfilled("wf-1", ob_id, "CISO paged")) is None
        assert await send(wire, frame) is None  # a late replay does not reopen it
        assert await send(wire, fulfilled("wf-1", ob_id, "again")) is None
        (done,) = await listing(c)
        events = await until(lambda: [e for e in c.kinds("obligation") if e["id"] == ob_id],
                             "obligation events")
        await until(lambda: len(c.kinds("obligation")) >= 2, "the fulfilled event")
    assert done["state"] == "fulfilled" and done["by"] == "agent-a"
    assert done["note"] == "CISO paged"
    assert [e["state"] for e in c.kinds("obligation")] == ["open", "fulfilled"]
    assert events[0]["state"] == "open"


async def test_an_agent_without_its_context_opens_and_fulfils_under_the_resolved_run(og):
    # IRQ_AGENT_CONTEXT unset: the helper builds ids with an empty context and sends
    # context null; the gateway has one dbos context and files them under that run
    frame = obligation("wf-9")
    frame["context"] = None
    ob = frame["obligation"]
    blank_id = ob["id"].replace("dbos:local/", "dbos:/")
    ob.update(id=blank_id, run_id="dbos:/wf-9")
    async with agent(og.url, og.tokens["agent"]) as wire, \
            client(og.url, og.tokens["operator"]) as c:
        assert await send(wire, frame) is None
        (stored,) = await listing(c)
        assert stored["id"] == "dbos:local/wf-9#1/phi-read-notify"
        assert stored["run_id"] == "dbos:local/wf-9"
        done = fulfilled("wf-9", blank_id, "paged")
        done["context"] = None
        assert await send(wire, done) is None
        (settled,) = await listing(c)
    assert settled["state"] == "fulfilled" and settled["note"] == "paged"


async def test_a_dispensation_arrives_waived_and_the_snapshot_carries_it(og):
    frame = obligation("wf-2", state="waived", by="compliance-exempt")
    async with agent(og.url, og.tokens["agent"]) as wire:
        assert await send(wire, frame) is None
        no_by = obligation("wf-2", "2", state="waived")
        assert (await send(wire, no_by))["code"] == "invalid"
        closed = obligation("wf-2", "3", state="fulfilled")
        assert (await send(wire, closed))["code"] == "invalid"
    async with client(og.url, og.tokens["viewer"]) as c:
        await until(lambda: c.snapshot, "the snapshot")
        (waived,) = c.snapshot["obligations"]
    assert waived["state"] == "waived" and waived["by"] == "compliance-exempt"


async def test_operators_fulfil_and_waive_with_a_note(og):
    async with agent(og.url, og.tokens["agent"]) as wire:
        for call in ("1", "2", "3"):
            assert await send(wire, obligation("wf-3", call)) is None
    first, second, third = (f"dbos:local/wf-3#{n}/phi-read-notify" for n in ("1", "2", "3"))
    async with client(og.url, og.tokens["operator"]) as ops, \
            client(og.url, og.tokens["viewer"]) as viewer:
        done = (await ops.command("obligation_fulfil", [first], "CISO told by phone",
                                  key="k1"))["results"][0]
        assert done["outcome"] == "applied"
        replay = (await ops.command("obligation_fulfil", [first], "CISO told by phone",
                                    key="k1"))["results"][0]
        assert replay["replayed"] is True and replay["outcome"] == "applied"
        again = (await ops.command("obligation_waive", [first], "not needed"))["results"][0]
        assert again["outcome"] == "conflict" and "already fulfilled by ops" in again["detail"]
        waived = (await ops.command("obligation_waive", [second], "test data only"))
        assert waived["results"][0]["outcome"] == "applied"
        unknown = (await ops.command("obligation_fulfil", ["dbos:local/nope#1/x"], "x"))
        assert unknown["results"][0]["error"] == "not_found"
        no_note = await ops.command("obligation_fulfil", [third])
        assert no_note["type"] == "error" and no_note["code"] == "invalid"
        refused = (await viewer.command("obligation_fulfil", [third], "me too"))["results"][0]
        assert refused["outcome"] == "forbidden"
        by_id = {o["id"]: o for o in await listing(ops)}
        open_only = await listing(ops, state="open")
        audit = (await ops.query("audit", limit=50))["data"]
    assert by_id[first]["state"] == "fulfilled" and by_id[first]["by"] == "ops"
    assert by_id[first]["note"] == "CISO told by phone"
    assert by_id[second]["state"] == "waived" and by_id[second]["note"] == "test data only"
    assert [o["id"] for o in open_only] == [third]
    actions = [(a["action"], a["outcome"]) for a in audit if a["action"].startswith("oblig")]
    assert ("obligation_fulfil", "applied") in actions
    assert ("obligation_waive", "conflict") in actions
    assert ("obligation_fulfil", "forbidden") in actions


async def test_an_obligation_past_its_due_time_turns_overdue_with_a_warning(og):
    frame = obligation("wf-4", within_s=1.0)
    async with client(og.url, og.tokens["operator"]) as c:
        async with agent(og.url, og.tokens["agent"]) as wire:
            assert await send(wire, frame) is None
        notices = await until(lambda: [n for n in c.kinds("notice") if "overdue" in n["message"]],
                              "the overdue notice", timeout_s=5)
        (late,) = await listing(c, state="overdue")
        fulfil = (await c.command("obligation_fulfil", [late["id"]], "late, but done"))
        await until(lambda: len(c.kinds("obligation")) >= 3, "the fulfilled event")
    assert notices[0]["level"] == "warning" and notices[0]["run_id"] == "dbos:local/wf-4"
    assert notices[0]["message"].startswith(f"obligation {late['id']} overdue: notify the CISO "
                                            "(rule phi-read-notify, due ")
    assert [e["state"] for e in c.kinds("obligation")][-2:] == ["overdue", "fulfilled"]
    assert fulfil["results"][0]["outcome"] == "applied"


async def test_agent_decisions_show_in_the_run_and_replays_are_kept_once(og):
    og.gateway.hub.observe_runs([Run(id="dbos:local/wf-5", backend="dbos", context="local",
                                     native_id="wf-5", name="wf-5")])
    async with client(og.url, og.tokens["operator"]) as c:
        decision = (await c.query("policy_check", invocation={
            "tool": "refund", "args": {"amount": 500}}))["data"]
        frame = {"type": "policy_event", "event": "decision", "backend": "dbos",
                 "context": "local", "native_id": "wf-5", "call_id": "7", "tool": "refund",
                 "at": datetime.now(UTC).isoformat(), "decision": decision}
        async with agent(og.url, og.tokens["agent"]) as wire:
            assert await send(wire, frame) is None
            assert await send(wire, frame) is None
            future = {**frame, "call_id": "8",
                      "at": (datetime.now(UTC) + timedelta(hours=1)).isoformat()}
            assert (await send(wire, future))["code"] == "invalid"
            bad = {**frame, "decision": {"outcome": "maybe"}}
            assert (await send(wire, bad))["code"] == "invalid"
        detail = (await c.query("run", run_id="dbos:local/wf-5"))["data"]
    (kept,) = detail["policy_decisions"]
    assert kept["call_id"] == "7" and kept["tool"] == "refund"
    assert kept["outcome"] == "require_approval" and kept["winner"] == "refund-large"
    assert kept["rules"] == ["refund-large"] and kept["explanation"]
    assert kept["policy_version"] == og.gateway.policy.version


async def test_an_agent_token_cannot_touch_runs_outside_its_scope(og):
    mine = obligation("wf-6")
    async with agent(og.url, og.tokens["agent"]) as wire:
        assert await send(wire, mine) is None
    async with agent(og.url, og.tokens["team"]) as wire:
        refused = await send(wire, obligation("wf-7"))
        assert refused["code"] == "out_of_scope"
        stolen = await send(wire, fulfilled("wf-6", mine["obligation"]["id"], "done"))
        assert stolen["code"] == "out_of_scope"
        inside = await send(wire, fulfilled("team-a-1", mine["obligation"]["id"], "done"))
        assert inside["code"] == "not_found"  # another run's obligation is not visible
        forged = obligation("team-a-1")
        forged["obligation"]["id"] = mine["obligation"]["id"]
        assert (await send(wire, forged))["code"] == "invalid"
        assert await send(wire, obligation("team-a-1")) is None  # in scope: accepted
        await wire.ws.send(json.dumps({"type": "ping", "id": "still-open"}))
    async with client(og.url, og.tokens["operator"]) as c:
        states = {o["id"]: o["state"] for o in await listing(c)}
        stats = (await c.query("stats"))["data"]
    assert states[mine["obligation"]["id"]] == "open"
    assert "dbos:local/wf-7#1/phi-read-notify" not in states
    assert stats["refused"]["out_of_scope"] >= 2


async def _query(url: str, token: str, what: str, **fields: Any) -> Any:
    async with client(url, token) as c:
        return (await c.query(what, **fields))["data"]


async def test_obligations_survive_a_gateway_sigkill(tmp_path: Path):
    gw = CrashableGateway(tmp_path, f"dbos+sqlite:///{tmp_path}/none/a.db?context=local")
    agent_token = create_token(Role.AGENT, "agent-a", tmp_path, scopes=["dbos:local"])
    gw.start()
    try:
        async with agent(gw.url, agent_token) as wire:
            for call in ("1", "2", "3"):
                assert await send(wire, obligation("wf-9", call)) is None
            assert await send(wire, obligation("wf-9", "4", within_s=1.5)) is None
            assert await send(wire, obligation("wf-9", "5", state="waived",
                                                by="compliance-exempt")) is None
            ids = [f"dbos:local/wf-9#{n}/phi-read-notify" for n in range(1, 6)]
            assert await send(wire, fulfilled("wf-9", ids[0], "paged")) is None
        async with client(gw.url, gw.tokens["operator"]) as c:
            waived = await c.command("obligation_waive", [ids[1]], "drill", key="w-1")
            assert waived["results"][0]["outcome"] == "applied"
        assert gw.process is not None
        gw.process.kill()  # SIGKILL: no shutdown
        gw.process.wait()
        await asyncio.sleep(1.6)  # the fourth falls due while the gateway is down
        gw.start()
        by_id = {o["id"]: o for o in await _query(gw.url, gw.tokens["operator"], "obligations")}
        assert by_id[ids[0]]["state"] == "fulfilled" and by_id[ids[0]]["by"] == "agent-a"
        assert by_id[ids[0]]["note"] == "paged"
        assert by_id[ids[1]]["state"] == "waived" and by_id[ids[1]]["by"] == "operator-1"
        assert by_id[ids[2]]["state"] == "open"
        assert by_id[ids[4]]["state"] == "waived" and by_id[ids[4]]["by"] == "compliance-exempt"
        overdue = await until_async(lambda: _query(gw.url, gw.tokens["operator"],
                                                   "obligations", state="overdue"))
        assert [o["id"] for o in overdue] == [ids[3]]
        async with agent(gw.url, agent_token) as wire:  # the agent's replay after restart
            assert await send(wire, obligation("wf-9", "1")) is None
        async with client(gw.url, gw.tokens["operator"]) as c:
            replay = await c.command("obligation_waive", [ids[1]], "drill", key="w-1")
            snapshot_ids = {o["id"]: o["state"] for o in (await until(
                lambda: c.snapshot, "snapshot"))["obligations"]}
        assert replay["results"][0]["replayed"] is True
        assert snapshot_ids[ids[0]] == "fulfilled" and len(snapshot_ids) == 5
        assert (tmp_path / "gateway.db").stat().st_mode & 0o077 == 0
    finally:
        gw.stop()


async def until_async(fetch: Any, timeout_s: float = 5.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        value = await fetch()
        if value:
            return value
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.2)


async def test_the_client_view_keeps_obligations_and_the_policy(og):
    from console.client import GatewayClient

    frame = obligation("wf-10")
    async with GatewayClient(og.url, og.tokens["operator"]) as gc:
        assert gc.view.policy is not None
        assert gc.view.policy["version"] == og.gateway.policy.version
        async with agent(og.url, og.tokens["agent"]) as wire:
            assert await send(wire, frame) is None
        ob_id = frame["obligation"]["id"]
        await until(lambda: ob_id in gc.view.obligations, "the obligation in the view")
        assert gc.view.obligations[ob_id].state == "open"
        await gc.named_command("obligation_waive", [ob_id], reason="drill")
        await until(lambda: gc.view.obligations[ob_id].state == "waived", "the waived state")
    assert gc.view.obligations[ob_id].by == "ops"
