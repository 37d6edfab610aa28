"""Backend URLs -> adapters.

``KIND+SCHEME://...`` names one backend context:

- ``dbos+sqlite:///var/lib/agents/sys.db``, ``dbos+postgresql://user@host/db?password_env=PGPASS``
- ``temporal+http://127.0.0.1:7243/default`` (namespace as path; ``temporal+https`` for TLS)
- ``langgraph+http://127.0.0.1:2024``
- ``restate+http://127.0.0.1:9070?ingress=http://127.0.0.1:8080``

Query parameters common to all: ``context`` (the context name in run ids, default ``local``),
``poll`` (seconds between polls). Anything else is passed to the adapter in ``params``.
Secrets are named, not written: ``<name>_env=VAR`` / ``<name>_file=PATH`` and
``header_env=``/``header_file=``, read by the adapter (backend_adapters/url_secrets.py), so
no password has to be on a command line. Adapters are imported lazily so a missing extra
only matters for the backend that needs it.
"""

from __future__ import annotations

import importlib
from typing import cast
from urllib.parse import parse_qsl, urlsplit

from backend_adapters.base import Backend, BackendFactory, BackendURL, BackendURLError, PauseLedger

__all__ = [
    "EXTRAS",
    "KINDS",
    "BackendURL",
    "BackendURLError",
    "adapter_factory",
    "open_backend",
    "parse_backend_url",
]

KINDS = {
    "dbos": "backend_adapters.dbos.adapter",
    "temporal": "backend_adapters.temporal.adapter",
    "langgraph": "backend_adapters.langgraph.adapter",
    "restate": "backend_adapters.restate.adapter",
}

EXTRAS = {"dbos": "dbos", "temporal": "temporal", "langgraph": "langgraph", "restate": "restate"}


def parse_backend_url(raw: str) -> BackendURL:
    head, sep, _rest = raw.partition("://")
    kind, plus, _scheme = head.partition("+")
    if not sep or not plus or kind not in KINDS:
        raise BackendURLError(
            f"not a backend URL: {raw!r} (expected KIND+SCHEME://..., KIND one of "
            + ", ".join(KINDS)
            + ")"
        )
    parts = urlsplit(raw[len(kind) + 1 :])
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    context = query.pop("context", "") or "local"
    if "/" in context or ":" in context or "#" in context:
        raise BackendURLError(f"context name may not contain '/', ':' or '#': {context!r}")
    poll = query.pop("poll", None)
    try:
        poll_s = float(poll) if poll is not None else None
    except ValueError as exc:
        raise BackendURLError(f"poll must be a number of seconds: {poll!r}") from exc
    # keep "//" even with an empty netloc: sqlite:///abs/path must stay a valid SQLAlchemy URL
    target = f"{parts.scheme}://{parts.netloc}{parts.path}"
    return BackendURL(
        kind=kind, target=target, context=context, poll_s=poll_s, params=query, raw=raw
    )


def adapter_factory(kind: str) -> BackendFactory:
    """The ``from_url`` entry point of the adapter for ``kind`` (imported now).

    BackendURLError names a kind without an adapter, a missing extra, or an adapter module
    that does not define ``from_url``.
    """
    module_name = KINDS[kind]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or ""
        if missing and module_name.startswith(missing):  # the adapter itself is absent
            raise BackendURLError(
                f"this irq has no {kind} adapter yet (the protocol is ready for it: "
                "backend_adapters/base.py)"
            ) from exc
        raise BackendURLError(
            f"the {kind} adapter needs the '{EXTRAS[kind]}' extra: "
            f"pip install 'irq[{EXTRAS[kind]}]' ({exc})"
        ) from exc
    factory: object = getattr(module, "from_url", None)
    if not callable(factory):
        raise BackendURLError(
            f"{module_name} defines no from_url entry point (backend_adapters.base.BackendFactory)"
        )
    # the signature is checked statically (each adapter module assigns its from_url to a
    # BackendFactory) and at test time (tests/unit/test_backend_conformance.py)
    return cast(BackendFactory, factory)


def open_backend(url: BackendURL | str, ledger: PauseLedger) -> Backend:
    """Construct (not start) the adapter for ``url``. BackendURLError names a missing extra."""
    parsed = parse_backend_url(url) if isinstance(url, str) else url
    return adapter_factory(parsed.kind)(parsed, ledger)
