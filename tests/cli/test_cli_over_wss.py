"""GatewayClient and the CLI over wss:// against ``irq serve --tls-cert --tls-key`` (a real subprocess).

irq has no CA option of its own: clients verify the gateway's certificate with Python's default
TLS context, which trusts the system store plus the CA file named by ``SSL_CERT_FILE`` (the
standard OpenSSL variable). These tests give a private CA (trustme) that way, and check that
without it the certificate is refused with a clear "unreachable" error, never used unverified.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme
from cli_harness import ROOT, irq_process

from console.cli.exits import ExitCode
from console.client import GatewayClient, GatewayUnreachable
from console.gateway.auth import create_token
from console.model import Role
from console.processes import free_port, stop_process


@dataclass
class TLSGateway:
    url: str
    ca_file: Path
    token: str
    process: subprocess.Popen[bytes]
    log: Path


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def tls_gateway(irq_home: Path, tmp_path: Path) -> Iterator[TLSGateway]:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    certfile, keyfile, ca_file = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    cert.cert_chain_pems[0].write_to_path(str(certfile))
    cert.private_key_pem.write_to_path(str(keyfile))
    ca.cert_pem.write_to_path(str(ca_file))
    token = create_token(Role.OPERATOR, "wss-operator", irq_home)
    port = free_port()
    log = irq_home / "serve.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "console.cli.app", "serve", "--port", str(port),
             "--tls-cert", str(certfile), "--tls-key", str(keyfile)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "IRQ_HOME": str(irq_home)}, cwd=ROOT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not _listening(port):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "irq serve --tls-cert did not listen:\n" + log.read_text()
            time.sleep(0.1)
        yield TLSGateway(f"wss://127.0.0.1:{port}", ca_file, token, proc, log)
    finally:
        stop_process(proc)


async def test_gateway_client_verifies_the_certificate_against_the_ca_in_ssl_cert_file(
    tls_gateway: TLSGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with pytest.raises(GatewayUnreachable, match="CERTIFICATE_VERIFY_FAILED|certificate verify"):
        async with GatewayClient(tls_gateway.url, tls_gateway.token, open_timeout=10):
            pass

    monkeypatch.setenv("SSL_CERT_FILE", str(tls_gateway.ca_file))
    async with GatewayClient(tls_gateway.url, tls_gateway.token, open_timeout=10) as client:
        assert (client.identity, client.role) == ("wss-operator", "operator")
        assert client.view.epoch  # the snapshot arrived over the TLS connection
        assert await client.query("audit", limit=5) == []


def test_cli_over_wss_trusts_the_ca_in_ssl_cert_file_from_env_and_from_a_context(
    tls_gateway: TLSGateway, irq_home: Path
) -> None:
    trusted = {"SSL_CERT_FILE": str(tls_gateway.ca_file)}
    # the URL and token from the environment
    env = {"IRQ_URL": tls_gateway.url, "IRQ_TOKEN": tls_gateway.token, **trusted}
    runs = irq_process("runs", "-o", "json", env=env)
    assert runs.returncode == 0, runs.stderr
    assert json.loads(runs.stdout) == []

    # the URL and token from a context in the config file
    (irq_home / "config.toml").write_text(
        'current_context = "tls"\n\n[contexts.tls]\n'
        f'url = "{tls_gateway.url}"\ntoken = "{tls_gateway.token}"\n'
    )
    (irq_home / "config.toml").chmod(0o600)
    audit = irq_process("audit", "-o", "json", env=trusted)
    assert audit.returncode == 0, audit.stderr
    assert isinstance(json.loads(audit.stdout), list)

    # without the CA: refused, exit 6 (backend/gateway unreachable), and it says why
    untrusted = {"SSL_CERT_FILE": str(irq_home / "no-such-ca.pem")}
    refused = irq_process("runs", "-o", "json", env=untrusted)
    assert refused.returncode == ExitCode.UNREACHABLE, (refused.returncode, refused.stderr)
    assert refused.stdout == ""
    assert "certificate verify failed" in refused.stderr.lower(), refused.stderr
