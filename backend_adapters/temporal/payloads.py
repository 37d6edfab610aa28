"""Decoding Temporal payloads as the HTTP API returns them (proto3 JSON).

A payload list comes back in *shorthand* (plain JSON values) when every payload is plain
``json/plain``; otherwise, and always for search attributes, each payload is in full form
``{"metadata": {"encoding": b64, ...}, "data": b64}``. Both are handled here.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Any


class PayloadUndecodable(ValueError):
    """A payload that is not JSON (codec-encrypted, protobuf binary, ...)."""


def _b64(value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=False)
    except (binascii.Error, ValueError) as exc:
        raise PayloadUndecodable(f"bad base64: {exc}") from exc


def is_full_payload(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("metadata"), dict)
        and set(value) <= {"metadata", "data", "externalPayloads"}
    )


def decode_payload(value: Any) -> Any:
    """One payload (shorthand or full form) -> its JSON value."""
    if not is_full_payload(value):
        return value
    meta = value["metadata"]
    encoding = _b64(meta.get("encoding", "")).decode("utf-8", "replace")
    if encoding == "binary/null":
        return None
    if encoding != "json/plain":
        raise PayloadUndecodable(f"payload encoding {encoding!r} is not json/plain")
    data = _b64(value.get("data", ""))
    try:
        return json.loads(data) if data else None
    except ValueError as exc:
        raise PayloadUndecodable(f"payload is not JSON: {exc}") from exc


def decode_payloads(values: Any) -> list[Any]:
    """A payload list (``[...]`` or ``{"payloads": [...]}``) -> JSON values.

    Undecodable payloads become ``None`` rather than failing the whole observation.
    """
    if isinstance(values, dict) and "payloads" in values:
        values = values["payloads"]
    if not isinstance(values, list):
        return []
    out: list[Any] = []
    for value in values:
        try:
            out.append(decode_payload(value))
        except PayloadUndecodable:
            out.append(None)
    return out


def first_payload(values: Any) -> Any:
    decoded = decode_payloads(values)
    return decoded[0] if decoded else None


def search_attribute(info: dict[str, Any], name: str) -> Any:
    """A search attribute of a listed / described execution, decoded (None when unset)."""
    fields = (info.get("searchAttributes") or {}).get("indexedFields") or {}
    if name not in fields:
        return None
    try:
        return decode_payload(fields[name])
    except PayloadUndecodable:
        return None


def memo_field(info: dict[str, Any], key: str) -> Any:
    """A memo entry of a listed / described execution, decoded (None when absent)."""
    fields = (info.get("memo") or {}).get("fields") or {}
    if key not in fields:
        return None
    try:
        return decode_payload(fields[key])
    except PayloadUndecodable:
        return None


def parse_time(value: Any) -> datetime | None:
    """RFC 3339 with nanoseconds (``2026-11-29T10:06:58.845699242Z``) -> aware datetime."""
    if not isinstance(value, str) or not value or value.startswith("0001-01-01"):
        return None
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    head, dot, rest = text.partition(".")
    if dot:
        digits = ""
        i = 0
        while i < len(rest) and rest[i].isdigit():
            digits += rest[i]
            i += 1
        text = f"{head}.{(digits + '000000')[:6]}{rest[i:]}"
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def parse_duration(value: Any) -> float | None:
    """Proto JSON duration (``"5s"``, ``"0.500s"``) -> seconds; None when absent or zero."""
    if not isinstance(value, str) or not value.endswith("s"):
        return None
    try:
        seconds = float(value[:-1])
    except ValueError:
        return None
    return seconds if seconds > 0 else None


def json_payloads(values: list[Any]) -> dict[str, Any]:
    """JSON values as a Payloads message in full form (``json/plain``, base64): unlike the
    shorthand list, a value that happens to look like a raw payload (``{"metadata", "data"}``)
    or a protobuf message (``_protoMessageType``) is still sent as the JSON it is."""
    encoding = base64.b64encode(b"json/plain").decode("ascii")
    return {
        "payloads": [
            {
                "metadata": {"encoding": encoding},
                "data": base64.b64encode(
                    json.dumps(v, separators=(",", ":")).encode("utf-8")
                ).decode("ascii"),
            }
            for v in values
        ]
    }
