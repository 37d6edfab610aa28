"""Secrets of backend URLs, read from environment variables or files the URL names.

A password or API key written into a backend URL shows in ``ps``, in shell history and in
``config.toml``. A backend URL names where the secret is instead, and the adapter reads it
when it is built (``irq serve`` fails with a clear message when it is missing):

=============================  ===========================================================
``<name>_env=VAR``             the value of the environment variable ``VAR``
``<name>_file=PATH``           the contents of the file ``PATH`` (one trailing newline is
                               dropped; keep the file mode 0600)
``header_env=Name:VAR``        an HTTP header ``Name`` from ``VAR`` (several: comma-separated)
``header_file=Name:PATH``      an HTTP header ``Name`` from the file ``PATH``
=============================  ===========================================================

``<name>`` is what the adapter asks for: ``password`` (DBOS on PostgreSQL), ``api_key``
(Temporal). The URL itself, which only holds the variable's name or the file's path, is what
irq displays and logs; the secret never is.
"""

from __future__ import annotations

import os
from pathlib import Path

from backend_adapters.base import BackendURLError

HEADER_PARAMS = ("header_env", "header_file")


def _from_env(label: str, var: str) -> str:
    """``label`` is the parameter as written (``password_env=PGPASS``), for error messages."""
    if not var:
        raise BackendURLError(f"{label}: names no environment variable")
    value = os.environ.get(var)
    if not value:
        state = "empty" if value == "" else "not set"
        raise BackendURLError(f"{label}: the environment variable {var} is {state}")
    return value


def _from_file(label: str, path: str) -> str:
    if not path:
        raise BackendURLError(f"{label}: names no file")
    try:
        text = Path(path).expanduser().read_text()
    except OSError as exc:
        raise BackendURLError(f"{label}: cannot read the file: {exc.strerror or exc}") from exc
    value = text[:-1] if text.endswith("\n") else text
    if value.endswith("\r"):
        value = value[:-1]
    if not value:
        raise BackendURLError(f"{label}: the file is empty")
    return value


def take_secret(params: dict[str, str], name: str) -> str | None:
    """The secret ``name`` named by ``<name>_env`` or ``<name>_file`` (both are removed from
    ``params``); None when the URL names neither. BackendURLError when it names both, or a
    variable that is unset or empty, or a file that cannot be read or is empty."""
    env = params.pop(f"{name}_env", None)
    path = params.pop(f"{name}_file", None)
    if env is not None and path is not None:
        raise BackendURLError(f"give {name}_env= or {name}_file=, not both")
    if env is not None:
        return _from_env(f"{name}_env={env}", env)
    if path is not None:
        return _from_file(f"{name}_file={path}", path)
    return None


def take_headers(params: dict[str, str]) -> dict[str, str]:
    """HTTP headers named by ``header_env=Name:VAR,...`` and ``header_file=Name:PATH,...``
    (both removed from ``params``)."""
    headers: dict[str, str] = {}
    for param in HEADER_PARAMS:
        raw = params.pop(param, None)
        if raw is None:
            continue
        for item in raw.split(","):
            header, colon, source = item.strip().partition(":")
            header = header.strip()
            if not colon or not header or not source.strip():
                raise BackendURLError(f"{param}= takes Header-Name:SOURCE, got {item.strip()!r}")
            if any(c in header for c in " \t\r\n:"):
                raise BackendURLError(f"{param}=: not a header name: {header!r}")
            read = _from_env if param == "header_env" else _from_file
            label = f"{param}={header}:{source.strip()}"
            value = read(label, source.strip())
            if "\n" in value or "\r" in value:
                raise BackendURLError(f"{label}: the value spans more than one line")
            headers[header] = value
    return headers
