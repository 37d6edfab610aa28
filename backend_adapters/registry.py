"""Backend URLs -> adapters.

``KIND+SCHEME://...`` names one backend context:

- ``dbos+sqlite:///var/lib/agents/sys.db``, ``dbos+postgresql://user:pw@host/db``
- ``temporal+http://127.0.0.1:7243/default`` (namespace as path; ``temporal+https`` for TLS)
- ``langgraph+http://127.0.0.1:2024``
- ``restate+http://127.0.0.1:9070?ingress=http://127.0.0.1:8080``

Query parameters common to all: ``context`` (the context name in run ids, default ``local``),
``poll`` (seconds between polls). Anything else is passed to the adapter in ``params``.
Adapters are imported lazily so a missing extra only matters for the backend that needs it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from backend_adapters.base import Backend, PauseLedger

KINDS = {
    "dbos": "backend_adapters.dbos.adapter",
    "temporal": "backend_adapters.temporal.adapter",
    "langgraph": "backend_adapters.langgraph.adapter",
    "restate": "backend_adapters.restate.adapter",
}

EXTRAS = {"dbos": "dbos", "temporal": "temporal", "langgraph": "langgraph", "restate": "restate"}


class BackendURLError(ValueError):
    pass


@dataclass(frozen=True)
class BackendURL:
    kind: str  # dbos | temporal | langgraph | restate
    target: str  # the URL without the "kind+" prefix and without irq's own parameters
    context: str = "local"
    poll_s: float | None = None
    params: dict[str, str] = field(default_factory=dict)
    raw: str = ""

    @property
    def display(self) -> str:
        """The URL without credentials, for screens and logs."""
        parts = urlsplit(self.target)
        netloc = parts.netloc.rsplit("@", 1)[-1]
        return f"{self.kind}+{parts.scheme}://{netloc}{parts.path}"


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


def open_backend(url: BackendURL | str, ledger: PauseLedger) -> Backend:
    """Construct (not start) the adapter for ``url``. ImportError names the missing extra."""
    parsed = parse_backend_url(url) if isinstance(url, str) else url
    try:
        module = importlib.import_module(KINDS[parsed.kind])
    except ImportError as exc:
        missing = getattr(exc, "name", None) or ""
        if missing and KINDS[parsed.kind].startswith(missing):  # the adapter itself is absent
            raise BackendURLError(
                f"this irq has no {parsed.kind} adapter yet (the protocol is ready for it: "
                "backend_adapters/base.py)"
            ) from exc
        raise BackendURLError(
            f"the {parsed.kind} adapter needs the '{EXTRAS[parsed.kind]}' extra: "
            f"pip install 'irq[{EXTRAS[parsed.kind]}]' ({exc})"
        ) from exc
    return module.from_url(parsed, ledger)
