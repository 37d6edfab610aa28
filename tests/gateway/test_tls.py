"""With a certificate and key the gateway serves wss:// and clients verify it."""

from __future__ import annotations

import ssl

import pytest
import trustme
from websockets.asyncio.client import connect

from console.gateway.auth import create_token
from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings
from console.model import Role


async def test_gateway_serves_wss_with_certificate_and_key(tmp_path):
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    certfile, keyfile = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.cert_chain_pems[0].write_to_path(str(certfile))
    cert.private_key_pem.write_to_path(str(keyfile))
    token = create_token(Role.VIEWER, "tls-viewer", tmp_path)
    settings = GatewaySettings(port=0, home=tmp_path, certfile=certfile, keyfile=keyfile)
    assert settings.scheme == "wss"
    gw = Gateway(settings)
    await gw.start()
    try:
        client_ctx = ssl.create_default_context()
        ca.configure_trust(client_ctx)
        url = f"wss://127.0.0.1:{gw.port}"
        async with connect(url, ssl=client_ctx,
                           additional_headers={"Authorization": f"Bearer {token}"}) as ws:
            await ws.send('{"type": "hello", "protocol": 1}')
            assert '"welcome"' in await ws.recv()
        untrusting = ssl.create_default_context()
        with pytest.raises(ssl.SSLCertVerificationError):
            async with connect(url, ssl=untrusting):
                pass
    finally:
        await gw.stop()
