import pytest

from backend_adapters.registry import BackendURLError, parse_backend_url


def test_sqlite_urls_keep_their_slashes():
    u = parse_backend_url("dbos+sqlite:////var/lib/agents/sys.db?context=prod&poll=0.5")
    assert (u.kind, u.target, u.context, u.poll_s) == ("dbos", "sqlite:////var/lib/agents/sys.db", "prod", 0.5)
    assert parse_backend_url("dbos+sqlite:///rel.db").target == "sqlite:///rel.db"


def test_credentials_are_hidden_from_display_and_params_are_passed_on():
    u = parse_backend_url("restate+http://u:pw@127.0.0.1:9070?ingress=http://127.0.0.1:8080")
    assert u.display == "restate+http://127.0.0.1:9070"
    assert u.params == {"ingress": "http://127.0.0.1:8080"}
    assert u.context == "local"


def test_temporal_namespace_is_the_path():
    u = parse_backend_url("temporal+http://127.0.0.1:7243/default")
    assert u.target == "http://127.0.0.1:7243/default"


@pytest.mark.parametrize("raw", ["sqlite:///x.db", "nope+http://x", "dbos://x", "dbos+sqlite:///x?context=a/b", "dbos+sqlite:///x?poll=soon"])
def test_bad_backend_urls_are_rejected_with_a_reason(raw):
    with pytest.raises(BackendURLError):
        parse_backend_url(raw)


def test_a_backend_without_an_adapter_says_so(monkeypatch):
    from backend_adapters import registry
    from backend_adapters.base import MemoryPauseLedger

    # every kind irq names has its adapter now; a kind whose adapter module is absent (a
    # packaging that left it out) must still say so instead of blaming a missing extra
    monkeypatch.setitem(registry.KINDS, "nomad", "backend_adapters.nomad.adapter")
    with pytest.raises(BackendURLError, match="no nomad adapter yet"):
        registry.open_backend("nomad+http://127.0.0.1:4646", MemoryPauseLedger())


@pytest.mark.parametrize("kind", ["dbos", "temporal", "langgraph", "restate"])
def test_every_named_backend_kind_has_its_adapter(kind):
    from backend_adapters.registry import adapter_factory

    assert callable(adapter_factory(kind))
