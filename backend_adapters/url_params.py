"""The backend-specific parameters of a backend URL, checked the same way by every adapter.

The registry takes irq's own parameters (``context``, ``poll``) and the kind prefix; an
adapter's ``from_url`` takes its own from ``BackendURL.params`` with these functions (and the
secrets with ``url_secrets.py``). ``backend`` is the adapter's name, which starts every error
message (``"restate URL: timeout must be a number: 'x'"``).
"""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

from backend_adapters.base import BackendURL, BackendURLError


def http_target(parsed: BackendURL, backend: str) -> tuple[SplitResult, str]:
    """The parts and the host of an ``http``/``https`` target that names a host;
    BackendURLError otherwise."""
    parts = urlsplit(parsed.target)
    if parts.scheme not in ("http", "https"):
        raise BackendURLError(f"{backend} URL scheme must be http or https: {parsed.raw!r}")
    if not parts.hostname:
        raise BackendURLError(f"{backend} URL names no host: {parsed.raw!r}")
    return parts, parts.hostname


def take_number(
    params: dict[str, str], name: str, default: float, minimum: float, *, backend: str
) -> float:
    """The number ``name=`` (removed from ``params``), ``default`` when absent; BackendURLError
    when it is not a number or is below ``minimum``."""
    raw = params.pop(name, None)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise BackendURLError(f"{backend} URL: {name} must be a number: {raw!r}") from exc
    if value < minimum:
        raise BackendURLError(f"{backend} URL: {name} must be >= {minimum:g}: {raw!r}")
    return value


def reject_unknown(params: dict[str, str], *, backend: str) -> None:
    """BackendURLError naming every parameter left in ``params`` (none the adapter took)."""
    if params:
        raise BackendURLError(f"{backend} URL: unknown parameter(s) " + ", ".join(sorted(params)))
