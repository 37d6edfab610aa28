"""Values as Restate's admin SQL rows hold them: durations, timestamps, and byte arrays
(``entry_json`` keeps a result's bytes as a list of numbers)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|h|m|s|d)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: object) -> float | None:
    """``"10m"``, ``"1m 30s"``, ``"500ms"``, ``"PT600S"`` -> seconds (None if unreadable)."""
    if not isinstance(text, str) or not text:
        return None
    if text.startswith("PT") and text.endswith("S"):
        try:
            return float(text[2:-1])
        except ValueError:
            return None
    parts = _DURATION.findall(text)
    if not parts:
        return None
    return sum(float(n) * _UNIT[u] for n, u in parts)


def parse_time(text: object) -> datetime | None:
    """An ISO timestamp (``…Z``), or milliseconds since the epoch (a journal's
    ``wake_up_time``); None if unreadable."""
    if isinstance(text, int) and not isinstance(text, bool) and text > 0:
        return datetime.fromtimestamp(text / 1000, UTC)
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def bytes_text(raw: object) -> str | None:
    """A journal byte array (``[34, 115, …]``) as text; None when it is not UTF-8."""
    if not isinstance(raw, list):
        return None
    try:
        return bytes(int(b) & 0xFF for b in raw).decode()
    except (ValueError, TypeError, UnicodeDecodeError):
        return None


def bytes_json(raw: object) -> Any:
    """A journal byte array decoded as JSON (None when it is not)."""
    text = bytes_text(raw)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
