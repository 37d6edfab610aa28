"""``restate+http://ADMIN?ingress=...`` as the registry builds it: the auth header comes from
the env var the URL names (never from the URL), unknown parameters and other schemes are
refused; the awakeable id names its signal index; Restate's durations read as seconds."""

from __future__ import annotations

import pytest

from backend_adapters.base import BackendURLError, MemoryPauseLedger
from backend_adapters.registry import open_backend
from backend_adapters.restate.adapter import RestateBackend
from backend_adapters.restate.conventions import signal_index
from backend_adapters.restate.state_mapping import parse_duration


async def test_auth_header_from_the_env_var_named_in_the_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RS_AUTH", "Bearer s3cret")
    backend = open_backend(
        "restate+http://127.0.0.1:9070?ingress=http://127.0.0.1:8080"
        "&header_env=authorization:RS_AUTH&context=prod",
        MemoryPauseLedger(),
    )
    assert isinstance(backend, RestateBackend)
    try:
        assert backend._http._client.headers["authorization"] == "Bearer s3cret"
        assert backend._http.ingress_url == "http://127.0.0.1:8080"
        assert backend.url == "http://127.0.0.1:9070" and "s3cret" not in backend.url
        assert backend.context == "prod" and backend.run_id("inv_1") == "restate:prod/inv_1"
    finally:
        await backend.close()


@pytest.mark.parametrize(
    "url",
    [
        "restate+http://127.0.0.1:9070?nope=1",
        "restate+ftp://127.0.0.1:9070",
        "restate+http://127.0.0.1:9070?ingress=ftp://x",
        "restate+http://127.0.0.1:9070?header_env=authorization:IRQ_NO_SUCH_VAR_SET",
    ],
)
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(BackendURLError):
        open_backend(url, MemoryPauseLedger())


def test_signal_index_and_durations() -> None:
    assert signal_index("sign_1czabTssdCwgECuleJDT1riBihBqpOtubAAAAEQ") == 17
    assert signal_index("prom_1abc") is None
    assert parse_duration("10m") == 600 and parse_duration("1m 30s") == 90
    assert parse_duration("500ms") == 0.5 and parse_duration("PT86400S") == 86400
    assert parse_duration("") is None
