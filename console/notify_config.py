"""The ``[notify]`` section: who is told what (TUI bell and desktop, gateway webhooks).

Event kinds: ``interrupt`` (a new pending interrupt), ``late`` and ``lost`` (a run turned so),
``leak`` (a suspected resource leak after pause/cancel), ``obligation`` (an obligation went
overdue), and each alert kind (``interrupt_overdue``, ``stalled``, ``no_workers``, ...: an
alert raised, once; a webhook gets them when its ``events`` names them -- that is how an
overdue interrupt is escalated to a second route). Everything is off by default. Secrets
never sit in the file or in argv: a webhook's headers name environment variables
(``header_env = "Authorization:SLACK_TOKEN"``), the same convention as the backend
URLs' ``header_env=``.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

EventKind = Literal["interrupt", "late", "lost", "leak", "obligation",
                    # alerts, by kind (console/alert_model.AlertKind): raised once each
                    "no_workers", "retrying", "given_up", "stalled", "liveness_unknown",
                    "interrupt_overdue", "obligation_overdue", "leak_suspected",
                    "held_too_long"]
#: what a webhook without ``events`` is sent (alerts are routed by naming their kinds)
EVENT_KINDS: tuple[EventKind, ...] = ("interrupt", "late", "lost", "leak", "obligation")
ALERT_KINDS: tuple[EventKind, ...] = (
    "no_workers", "retrying", "given_up", "stalled", "liveness_unknown", "interrupt_overdue",
    "obligation_overdue", "leak_suspected", "held_too_long")


class WebhookConfig(BaseModel):
    """One ``[[notify.webhooks]]`` entry (or one ``irq serve --webhook URL``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    url: str
    events: list[EventKind] = Field(default_factory=lambda: list(EVENT_KINDS))
    format: Literal["json", "slack"] = "json"
    header_env: str | None = None  # "Name:VAR[,Name2:VAR2]": header values from the environment

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an http:// or https:// URL, not {value!r}")
        return value

    def headers(self) -> dict[str, str]:
        """The headers ``header_env`` names, read now; ValueError names a missing variable."""
        headers: dict[str, str] = {}
        for item in (self.header_env or "").split(","):
            if not item.strip():
                continue
            name, colon, var = item.strip().partition(":")
            name, var = name.strip(), var.strip()
            if not colon or not name or not var or any(c in name for c in " \t\r\n"):
                raise ValueError(f"header_env: expected Name:VAR, not {item.strip()!r}")
            value = os.environ.get(var)
            if value is None:
                raise ValueError(f"header_env: the environment variable {var} is not set")
            headers[name] = value
        return headers


class NotifySettings(BaseModel):
    """The ``[notify]`` table of the config file (TUI) or of ``irq serve --notify-config``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    bell: list[EventKind] = []  # TUI: ring the terminal bell for these kinds
    desktop: list[EventKind] = []  # TUI: a desktop notification through the terminal
    osc: Literal["9", "777"] = "9"  # which desktop-notification sequence the terminal speaks
    per_kind: int = Field(default=3, ge=1, le=1000)  # per kind per window; then one summary
    window_s: float = Field(default=60.0, gt=0, le=86_400)
    webhooks: list[WebhookConfig] = []  # gateway only


def load_notify_file(path: Path) -> NotifySettings:
    """The ``[notify]`` section of a TOML file; ValueError names the file and the problem."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path}: {exc}") from exc
    try:
        return NotifySettings.model_validate(data.get("notify", {}))
    except ValidationError as exc:
        problems = "; ".join(
            f"notify.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"{path}: {problems}") from None
