"""Configuration of one Temporal context, from a backend URL.

``temporal+http://127.0.0.1:7243/default`` (HTTP API address; the path is the namespace) or
``temporal+https://host/ns`` for TLS. irq's own parameters (``context``, ``poll``) are taken
by the registry; the Temporal ones are:

=================  ==========================================================  ==========
parameter          meaning                                                     default
=================  ==========================================================  ==========
``rps``            request budget: requests per second sent to Temporal         20
``timeout``        deadline of one HTTP call, seconds                           5
``api_key_env``    environment variable holding the bearer token / API key      none
``api_key_file``   file holding it (``api_key=KEY`` and the URL password
                   ``https://:KEY@host/ns`` work too, but ``ps`` shows them)
``header_env``     extra HTTP headers from variables: ``Name:VAR,Name2:VAR2``   none
``header_file``    extra HTTP headers from files: ``Name:PATH``                 none
``tls``            ``true`` forces https with a ``temporal+http`` URL           false
``ca``             CA bundle path for TLS verification                          system
``tls_verify``     ``false`` disables certificate verification                  true
``query``          extra visibility filter, e.g. ``TaskQueue='agents'``         none
``closed_window``  seconds a closed run keeps being reported                    300
``failed_window``  seconds a failed, timed-out, terminated or canceled run      86400
                   keeps being reported (listed on each full list, so a gateway
                   started in the morning shows last night's failures)
``relist``         seconds between full lists of running workflows (between     30
                   them: started / closed / waiting since the last list)
``identity``       identity sent to Temporal with every command                 irq-console
``page_size``      visibility page size                                         1000
``max_runs``       most running (and closed) workflows listed per poll          10000
``watch``          most runs followed with history long polls                   8
=================  ==========================================================  ==========
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from backend_adapters.base import BackendURL, BackendURLError
from backend_adapters.url_params import reject_unknown, take_number
from backend_adapters.url_secrets import take_headers, take_secret

DEFAULT_POLL_S = 2.0


def _truthy(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class TemporalConfig:
    base_url: str  # scheme://host:port of the HTTP API
    namespace: str
    context: str = "local"
    display_url: str = ""
    api_key: str | None = field(default=None, repr=False)
    #: extra HTTP headers (``header_env=``/``header_file=``): secrets, never shown
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    verify: bool | str = True
    rps: float = 20.0
    poll_interval_s: float = DEFAULT_POLL_S
    timeout_s: float = 5.0
    visibility_filter: str = ""
    closed_window_s: float = 300.0
    failed_window_s: float = 86_400.0
    relist_s: float = 30.0
    identity: str = "irq-console"
    page_size: int = 1000
    max_runs: int = 10_000
    watch_max: int = 8
    query_timeout_s: float = 3.0
    workers_every_s: float = 30.0
    #: how long decide() keeps re-sending an update no worker has picked up yet
    decide_wait_s: float = 45.0

    @classmethod
    def from_url(cls, parsed: BackendURL) -> TemporalConfig:
        parts = urlsplit(parsed.target)
        params = dict(parsed.params)
        scheme = parts.scheme or "http"
        if _truthy(params.pop("tls", "false")):
            scheme = "https"
        if scheme not in ("http", "https"):
            raise BackendURLError(f"temporal URL scheme must be http or https: {parsed.raw!r}")
        host = parts.hostname or "127.0.0.1"
        netloc = f"[{host}]" if ":" in host else host
        if parts.port:
            netloc += f":{parts.port}"
        namespace = unquote(parts.path.strip("/")) or "default"
        if "/" in namespace:
            raise BackendURLError(f"temporal namespace (the URL path) has a '/': {namespace!r}")
        api_key = params.pop("api_key", None) or (unquote(parts.password or "") or None)
        key_named = take_secret(params, "api_key")  # api_key_env= / api_key_file=
        if key_named is not None:
            if api_key is not None:
                raise BackendURLError(
                    "temporal URL: an API key in the URL and api_key_env=/api_key_file="
                )
            api_key = key_named
        headers = tuple(take_headers(params).items())
        verify: bool | str = True
        if "ca" in params:
            verify = params.pop("ca")
        if not _truthy(params.pop("tls_verify", "true")):
            verify = False

        def number(name: str, default: float, minimum: float) -> float:
            return take_number(params, name, default, minimum, backend="temporal")

        config = cls(
            base_url=f"{scheme}://{netloc}",
            namespace=namespace,
            context=parsed.context,
            display_url=f"{scheme}://{netloc}/{namespace}",
            api_key=api_key,
            headers=headers,
            verify=verify,
            rps=number("rps", 20.0, 0.1),
            poll_interval_s=parsed.poll_s or DEFAULT_POLL_S,
            timeout_s=number("timeout", 5.0, 0.1),
            visibility_filter=params.pop("query", ""),
            closed_window_s=number("closed_window", 300.0, 0.0),
            failed_window_s=number("failed_window", 86_400.0, 0.0),
            relist_s=number("relist", 30.0, 0.0),
            identity=params.pop("identity", "irq-console"),
            page_size=int(number("page_size", 1000, 1)),
            max_runs=int(number("max_runs", 10_000, 1)),
            watch_max=int(number("watch", 8, 0)),
        )
        reject_unknown(params, backend="temporal")
        return config
