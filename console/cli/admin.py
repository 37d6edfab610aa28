"""Running a gateway: ``irq serve`` (tokens: console/cli/tokens.py)."""

from __future__ import annotations

import errno
import json
import logging
import os
import sys
from collections.abc import Coroutine
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from console.cli.exits import ExitCode, diagnose, fail
from console.cli.output import hint
from console.cli.serve_options import (
    AlertGraceOption,
    InterruptDeadlineOption,
    MetricsOption,
    MetricsTokenOption,
    PriceOption,
    RetentionOption,
    RetryingAfterOption,
    ShedAfterOption,
    ShedHoldOption,
    StalledAfterOption,
)
from console.cli.session import global_options

if TYPE_CHECKING:
    from console.gateway.settings import GatewaySettings

# -------------------------------------------------------------------------------- serve


class LogLevel(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


def context_alert_settings(context: str | None) -> dict[str, Any]:
    """The alert settings of the chosen or current context (GatewaySettings fields)."""
    from console.config import ConfigError, load_config
    from console.durations import parse_duration

    try:
        ctx = load_config().context(context or os.environ.get("IRQ_CONTEXT") or None)
    except ConfigError as exc:
        fail(ExitCode.USAGE, str(exc))
    out: dict[str, Any] = {}
    if ctx.interrupt_deadline:
        out["interrupt_deadline_s"] = parse_duration(ctx.interrupt_deadline).total_seconds()
    if ctx.stalled_after:
        out["stalled_after_s"] = parse_duration(ctx.stalled_after).total_seconds()
    if ctx.retrying_after is not None:
        out["retrying_after"] = ctx.retrying_after
    if ctx.held_too_long_after:
        out["held_too_long_after_s"] = parse_duration(ctx.held_too_long_after).total_seconds()
    return out


def _seconds(flag: str, text: str | None) -> float | None:
    from console.durations import parse_duration

    if text is None:
        return None
    try:
        return parse_duration(text).total_seconds()
    except ValueError as exc:
        fail(ExitCode.USAGE, f"{flag}: {exc}")


def context_backends(context: str | None) -> tuple[str, list[str]]:
    """(context name, backend URLs) of the chosen or current context in the config file."""

    from console.config import ConfigError, load_config

    try:
        ctx = load_config().context(context or os.environ.get("IRQ_CONTEXT") or None)
    except ConfigError as exc:
        fail(ExitCode.USAGE, str(exc))
    return ctx.name, list(ctx.backends)


def serve_command(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535, help="TCP port.")] = 7433,
    backend: Annotated[
        list[str] | None,
        typer.Option(
            "--backend",
            "-b",
            help="Backend URL (repeatable), e.g. dbos+sqlite:///PATH, "
            "temporal+http://HOST:PORT/NAMESPACE. Default: the context's backends.",
            show_default=False,
        ),
    ] = None,
    cert: Annotated[
        Path | None,
        typer.Option("--tls-cert", exists=True, dir_okay=False, help="TLS certificate (wss://)."),
    ] = None,
    key: Annotated[
        Path | None,
        typer.Option("--tls-key", exists=True, dir_okay=False, help="TLS private key (wss://)."),
    ] = None,
    log_level: Annotated[
        LogLevel, typer.Option("--log-level", help="Gateway log verbosity (stderr).")
    ] = LogLevel.INFO,
    policy: Annotated[
        Path | None,
        typer.Option("--policy", exists=True, dir_okay=False,
                     help="Policy file (TOML): loaded at start, reloaded when it changes."),
    ] = None,
    webhook: Annotated[
        list[str] | None,
        typer.Option("--webhook", help="Post notifications (JSON) to this URL (repeatable).",
                     show_default=False),
    ] = None,
    notify_config: Annotated[
        Path | None,
        typer.Option("--notify-config", exists=True, dir_okay=False,
                     help="TOML file whose [notify] section configures webhooks."),
    ] = None,
    journal: Annotated[
        str | None,
        typer.Option("--journal", envvar="IRQ_JOURNAL", show_default=False,
                     help="Journal database: postgresql://USER@HOST:PORT/DB, shared by several "
                     "gateways (password via PGPASSWORD or ~/.pgpass keeps it off the command "
                     "line). Default: gateway.db (SQLite) in IRQ_HOME, one gateway."),
    ] = None,
    gateway_id: Annotated[
        str | None,
        typer.Option("--gateway-id", show_default=False,
                     help="This gateway's name in a shared journal (default HOST:PORT); a "
                     "restarted gateway re-drives the unfinished commands of its name."),
    ] = None,
    retention: RetentionOption = None,
    price: PriceOption = None,
    interrupt_deadline: InterruptDeadlineOption = None,
    alert_grace: AlertGraceOption = None,
    stalled_after: StalledAfterOption = None,
    retrying_after: RetryingAfterOption = None,
    shed_after: ShedAfterOption = None,
    shed_hold: ShedHoldOption = None,
    metrics: MetricsOption = True,
    metrics_token: MetricsTokenOption = None,
) -> None:
    """Run the gateway: adapters, live index, intent/audit journal, websockets server."""
    from console.gateway.settings import GatewaySettings

    if (cert is None) != (key is None):
        fail(
            ExitCode.USAGE,
            "--tls-cert and --tls-key go together (both for wss://, neither for ws://)",
        )
    urls, source = _backend_urls(ctx, backend)

    from console.cli.notify import notify_settings

    settings = GatewaySettings(host=host, port=port, backends=urls, certfile=cert, keyfile=key,
                               policy_path=policy,
                               notify=notify_settings(webhook or [], notify_config),
                               journal=journal or "", gateway_id=gateway_id or "",
                               metrics=metrics, metrics_token=metrics_token or "",
                               **_upkeep(ctx, retention, price or []),
                               **_alert_settings(ctx, interrupt_deadline, alert_grace,
                                                 stalled_after, retrying_after),
                               **_shedding(shed_after, shed_hold))
    from console.gateway.journal_store import is_postgres_url, redacted

    if journal and not is_postgres_url(journal):
        fail(ExitCode.USAGE, f"--journal takes a postgresql:// URL, not {redacted(journal)!r} "
             "(the SQLite journal is always gateway.db in IRQ_HOME)")
    try:
        from console.gateway.server import run_gateway
    except ImportError as exc:
        fail(ExitCode.FAILED, f"the gateway server is not available in this installation: {exc}")

    configure_gateway_logging(log_level)
    _announce(settings, source, redacted(journal) if journal else "gateway.db")
    _serve_until_stopped(run_gateway(settings), host, port)


def _upkeep(ctx: typer.Context, retention: str | None, prices: list[str]) -> dict[str, Any]:
    """The settings of retention (flag > context > 30d), of the release commands of
    ``[resources.KIND]`` and of the prices (``--price`` > ``[prices]``)."""
    from console.config import ConfigError, load_config
    from console.durations import parse_duration
    from console.resource_kinds import release_commands

    try:
        config = load_config()
        context = config.context(global_options(ctx).context
                                 or os.environ.get("IRQ_CONTEXT") or None)
    except ConfigError as exc:
        fail(ExitCode.USAGE, str(exc))
    from console.prices import parse_price_flag

    upkeep: dict[str, Any] = {"release_commands": release_commands(config.resources)}
    try:
        upkeep["prices"] = config.prices.with_prices(dict(parse_price_flag(p) for p in prices))
    except ValueError as exc:
        fail(ExitCode.USAGE, f"--price: {exc}")
    text = retention or context.retention
    if text:
        try:
            upkeep["retention_s"] = parse_duration(text).total_seconds()
        except ValueError as exc:
            fail(ExitCode.USAGE, f"--retention: {exc}")
    return upkeep


def _alert_settings(ctx: typer.Context, interrupt_deadline: str | None,
                    alert_grace: str | None, stalled_after: str | None,
                    retrying_after: int | None = None) -> dict[str, Any]:
    """Flag > the context's keys > GatewaySettings' defaults."""
    out = context_alert_settings(global_options(ctx).context)
    if retrying_after is not None:
        out["retrying_after"] = retrying_after
    for field, flag, text in (("interrupt_deadline_s", "--interrupt-deadline", interrupt_deadline),
                              ("alert_grace_s", "--alert-grace", alert_grace),
                              ("stalled_after_s", "--stalled-after", stalled_after)):
        seconds = _seconds(flag, text)
        if seconds is not None:
            out[field] = seconds
    return out


def _shedding(shed_after: float | None, shed_hold: float | None) -> dict[str, Any]:
    """``--shed-after`` (0: never shed) and ``--shed-hold`` > GatewaySettings' defaults
    (beat_shedding.py)."""
    given = {"shed_after_s": shed_after, "shed_hold_s": shed_hold}
    return {name: value for name, value in given.items() if value is not None}


def _backend_urls(ctx: typer.Context, backend: list[str] | None) -> tuple[list[str], str]:
    """The backend URLs to serve (``--backend``, else the context's) and where they came
    from; exit 2 on one that does not parse."""
    from backend_adapters.registry import BackendURLError, parse_backend_url

    if backend:
        urls, source = list(backend), "--backend"
    else:
        name, urls = context_backends(global_options(ctx).context)
        source = f"context {name!r}"
    for url in urls:
        try:
            parse_backend_url(url)
        except BackendURLError as exc:
            fail(ExitCode.USAGE, str(exc))
    return urls, source


def _announce(settings: GatewaySettings, source: str, journal: str) -> None:
    """Where the gateway listens, its home, journal and backends (stderr); a hint when no
    client could connect yet."""
    from console.gateway.auth import tokens_path

    shown = ", ".join(_display_backend(u) for u in settings.backends) or "none"
    diagnose(f"gateway on {settings.url} (home {settings.home}, journal {journal}); "
             f"backends from {source}: {shown}")
    if not _has_tokens(tokens_path(settings.home)):
        hint(
            "  no tokens yet: every client will be refused; create one with "
            "`irq token create --role operator`"
        )


def _serve_until_stopped(gateway: Coroutine[Any, Any, None], host: str, port: int) -> None:
    """Run the gateway until ctrl-c; what stops it at start becomes a message and an exit
    code."""
    import asyncio

    from backend_adapters.registry import BackendURLError

    try:
        asyncio.run(gateway)
    except KeyboardInterrupt:
        pass
    except BackendURLError as exc:
        fail(ExitCode.USAGE, str(exc))
    except ValueError as exc:  # console.policy.loader.PolicyError: names file, rule and key
        from console.policy.loader import PolicyError

        if not isinstance(exc, PolicyError):
            raise
        fail(ExitCode.USAGE, f"invalid policy: {exc}")
    except RuntimeError as exc:  # JournalInUse (another gateway owns this IRQ_HOME's journal),
        # JournalUnavailable (the PostgreSQL journal cannot be reached; no password in it)
        fail(ExitCode.FAILED, str(exc))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            fail(
                ExitCode.FAILED,
                f"cannot listen on {host}:{port}: the port is in use",
                hint="pick another with --port",
            )
        fail(ExitCode.FAILED, f"cannot listen on {host}:{port}: {exc.strerror or exc}")


#: request-level loggers of libraries the gateway uses: one INFO line per HTTP request or
#: websocket connection (httpx logs every Temporal poll) is noise that grows without bound
THIRD_PARTY_LOGGERS = ("httpx", "httpcore", "websockets", "hpack", "urllib3", "asyncio")


class InertLogFormatter(logging.Formatter):
    """Log lines quote client and agent text (targets, reasons, ids, peers): control
    characters are shown, never sent to the terminal running ``irq serve``."""

    def format(self, record: logging.LogRecord) -> str:
        from console.terminal_text import terminal_safe

        return terminal_safe(super().format(record), multiline=True)


def configure_gateway_logging(level: LogLevel) -> None:
    """stderr logging for ``irq serve``; third-party request logs only with ``debug``."""
    if not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(InertLogFormatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
        logging.basicConfig(level=level.value.upper(), handlers=[handler])
    else:
        logging.getLogger().setLevel(level.value.upper())
    third_party = logging.DEBUG if level is LogLevel.DEBUG else logging.WARNING
    for name in THIRD_PARTY_LOGGERS:
        logging.getLogger(name).setLevel(third_party)


def _display_backend(url: str) -> str:
    """``kind:context location`` without credentials (and without the query string)."""
    from backend_adapters.registry import parse_backend_url

    parsed = parse_backend_url(url)
    location = url.split("+", 1)[1].split("?", 1)[0]
    if "@" in location:  # user:password@host: show the adapter's credential-free form
        location = parsed.display
    return f"{parsed.kind}:{parsed.context} {location}"


def _has_tokens(path: Path) -> bool:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return isinstance(data, list) and bool(data)
