"""Backend URL secrets come from environment variables or files the URL names; the secret
reaches the database driver or the HTTP client, never a display URL or a repr."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend_adapters.base import BackendURLError
from backend_adapters.dbos.location import locate
from backend_adapters.registry import parse_backend_url
from backend_adapters.temporal.config import TemporalConfig
from backend_adapters.url_secrets import take_headers, take_secret

SECRET = "s3cr:t/p@ss w%rd"  # characters a URL must quote


def dbos_location(raw: str):  # type: ignore[no-untyped-def]
    parsed = parse_backend_url(raw)
    return locate(parsed.raw, parsed.target, dict(parsed.params))


def test_password_env_reaches_the_database_url_and_never_the_display(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sqlalchemy.engine import make_url

    monkeypatch.setenv("IRQ_TEST_PGPASS", SECRET)
    raw = "dbos+postgresql://irq@db.internal:5433/dbos?password_env=IRQ_TEST_PGPASS&sslmode=require"
    location = dbos_location(raw)
    url = make_url(location.url)  # what DBOSClient gets, as SQLAlchemy reads it
    assert (url.username, url.password, url.host, url.port) == ("irq", SECRET, "db.internal", 5433)
    assert url.query == {"sslmode": "require"}  # the secret's name is not a driver parameter
    assert location.display == "postgresql://db.internal:5433/dbos"
    for shown in (location.display, repr(location), parse_backend_url(raw).display, raw):
        assert SECRET not in shown and "s3cr" not in shown


def test_password_file_drops_one_trailing_newline(tmp_path: Path) -> None:
    secret_file = tmp_path / "pg"
    secret_file.write_text(SECRET + "\n")
    secret_file.chmod(0o600)
    location = dbos_location(f"dbos+postgresql://irq@h/db?password_file={secret_file}")
    from sqlalchemy.engine import make_url

    assert make_url(location.url).password == SECRET
    assert "s3cr" not in repr(location)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("dbos+postgresql://irq@h/db?password_env=IRQ_TEST_UNSET", "IRQ_TEST_UNSET is not set"),
        ("dbos+postgresql://irq@h/db?password_env=IRQ_TEST_EMPTY", "IRQ_TEST_EMPTY is empty"),
        ("dbos+postgresql://irq@h/db?password_file=/nonexistent/pg", "cannot read the file"),
        ("dbos+postgresql://h/db?password_env=IRQ_TEST_PGPASS", "need a user"),
        ("dbos+postgresql://irq:pw@h/db?password_env=IRQ_TEST_PGPASS", "has a password"),
        ("dbos+postgresql://irq@h/db?password_env=IRQ_TEST_PGPASS&password_file=/x", "not both"),
        ("dbos+sqlite:///x.db?password_env=IRQ_TEST_PGPASS", "PostgreSQL"),
    ],
)
def test_a_secret_that_cannot_be_read_is_a_clear_url_error(
    raw: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("IRQ_TEST_UNSET", raising=False)
    monkeypatch.setenv("IRQ_TEST_EMPTY", "")
    monkeypatch.setenv("IRQ_TEST_PGPASS", SECRET)
    with pytest.raises(BackendURLError, match=message) as caught:
        dbos_location(raw)
    assert "s3cr" not in str(caught.value)


def test_temporal_api_key_and_headers_from_env_and_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IRQ_TEST_TEMPORAL_KEY", "key-" + SECRET)
    monkeypatch.setenv("IRQ_TEST_TENANT", "tenant-" + SECRET)
    token = tmp_path / "token"
    token.write_text("file-" + SECRET + "\n")
    cfg = TemporalConfig.from_url(parse_backend_url(
        "temporal+https://temporal.example/ns?api_key_env=IRQ_TEST_TEMPORAL_KEY"
        f"&header_env=X-Tenant:IRQ_TEST_TENANT&header_file=X-Proxy-Token:{token}"
    ))
    assert cfg.api_key == "key-" + SECRET
    assert dict(cfg.headers) == {"X-Tenant": "tenant-" + SECRET, "X-Proxy-Token": "file-" + SECRET}
    assert cfg.display_url == "https://temporal.example/ns"
    assert "s3cr" not in repr(cfg)
    from_file = TemporalConfig.from_url(
        parse_backend_url(f"temporal+http://h:1/ns?api_key_file={token}"))
    assert from_file.api_key == "file-" + SECRET
    with pytest.raises(BackendURLError, match="IRQ_TEST_UNSET is not set"):
        TemporalConfig.from_url(parse_backend_url("temporal+http://h:1/ns?api_key_env=IRQ_TEST_UNSET"))
    with pytest.raises(BackendURLError, match="API key in the URL and"):
        TemporalConfig.from_url(parse_backend_url(
            "temporal+http://:k@h:1/ns?api_key_env=IRQ_TEST_TEMPORAL_KEY"))


def test_temporal_http_client_sends_the_named_headers_over_the_wire(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real local HTTP server (standing for the proxy the headers are for) records them."""
    import asyncio
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from backend_adapters.temporal.http_api import TemporalHttp
    from console.processes import HOST

    seen: list[dict[str, str]] = []

    class Recorder(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            seen.append({k.lower(): v for k, v in self.headers.items()})
            body = json.dumps({"serverVersion": "recorder"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((HOST, 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("IRQ_TEST_TENANT", "tenant-" + SECRET)
    cfg = TemporalConfig.from_url(parse_backend_url(
        f"temporal+http://{HOST}:{server.server_address[1]}/ns"
        "?header_env=X-Tenant:IRQ_TEST_TENANT&api_key=k"))

    async def call() -> dict[str, object]:
        http = TemporalHttp(cfg.base_url, cfg.namespace, api_key=cfg.api_key,
                            headers=cfg.headers)
        try:
            return await http.system_info()
        finally:
            await http.aclose()

    try:
        assert asyncio.run(call()) == {"serverVersion": "recorder"}
    finally:
        server.shutdown()
        server.server_close()
    assert seen[0]["x-tenant"] == "tenant-" + SECRET
    assert seen[0]["authorization"] == "Bearer k"


def test_header_parameters_are_checked() -> None:
    for bad in ("X-Tenant", "X Tenant:VAR", ":VAR", "X-Tenant:"):
        with pytest.raises(BackendURLError, match="header_env"):
            take_headers({"header_env": bad})
    params = {"api_key_env": "", "other": "1"}
    with pytest.raises(BackendURLError, match="names no environment variable"):
        take_secret(params, "api_key")
