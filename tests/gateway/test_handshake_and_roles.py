from __future__ import annotations

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from console.client import GatewayClient, Unauthorized
from console.gateway.auth import create_token
from console.model import Role


async def test_missing_token_is_refused_at_the_handshake(gateway):
    with pytest.raises(InvalidStatus) as info:
        async with connect(gateway.url):
            pass
    assert info.value.response.status_code == 401


async def test_wrong_token_is_refused_at_the_handshake(gateway):
    with pytest.raises(Unauthorized, match="unknown token"):
        async with GatewayClient(gateway.url, "irq_not-a-real-token"):
            pass


async def test_agent_token_cannot_open_the_client_channel(gateway):
    with pytest.raises(Unauthorized):
        async with GatewayClient(gateway.url, gateway.tokens["agent"]):
            pass


async def test_viewer_cannot_push_on_the_agent_channel(gateway):
    with pytest.raises(InvalidStatus) as info:
        async with connect(
            gateway.url + "/agent",
            additional_headers={"Authorization": f"Bearer {gateway.tokens['viewer']}"},
        ):
            pass
    assert info.value.response.status_code == 403


async def test_viewer_cannot_mutate_and_the_refusal_is_audited(gateway):
    async with GatewayClient(gateway.url, gateway.tokens["viewer"]) as viewer:
        assert viewer.role == "viewer"
        results = await viewer.command("cancel", ["dbos:local/wf-1"], reason="try")
        assert [r.outcome for r in results] == ["forbidden"]
        assert results[0].error == "forbidden"
    async with GatewayClient(gateway.url, gateway.tokens["admin"]) as admin:
        audit = await admin.query("audit", limit=10)
    assert audit[0]["outcome"] == "forbidden"
    assert audit[0]["identity"] == "viewer-test"
    assert audit[0]["role"] == "viewer"
    assert audit[0]["reason"] == "try"


async def test_a_token_created_while_running_is_accepted_at_once(gateway):
    token = create_token(Role.OPERATOR, "late-comer", gateway.home)
    async with GatewayClient(gateway.url, token) as client:
        assert client.identity == "late-comer"
        assert client.role == "operator"


async def test_healthz_answers_plain_http(gateway):
    import httpx

    async with httpx.AsyncClient() as http:
        resp = await http.get(gateway.url.replace("ws://", "http://") + "/healthz")
    assert resp.status_code == 200


async def test_a_second_gateway_on_the_same_journal_is_refused(gateway):
    from console.gateway.journal import JournalInUse
    from console.gateway.server import Gateway
    from console.gateway.settings import GatewaySettings

    with pytest.raises(JournalInUse, match="another gateway"):
        Gateway(GatewaySettings(port=0, home=gateway.home))
