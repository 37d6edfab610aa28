"""``irq notify test``: check that notifications reach their receivers.

Without ``--webhook`` it asks the running gateway (admin token) to send a test notification to
every webhook it was started with and prints the result per webhook; with ``--webhook URL``
it posts the test message to that URL itself (same body, same retries). Also builds the
gateway's notification settings from ``irq serve --webhook`` / ``--notify-config``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from console.cli.exits import ExitCode, fail
from console.cli.help_layout import IrqCommand, IrqGroup
from console.cli.options import ContextOption, OutputOption, TokenOption, UrlOption
from console.cli.output import OutputFormat, emit, esc, make_table, print_table
from console.cli.session import connection_of, run_async, with_gateway

if TYPE_CHECKING:  # pydantic models: imported when a command needs them, not for --help
    from console.notify_config import NotifySettings

notify_app = typer.Typer(
    cls=IrqGroup,help="Notifications: webhooks from the gateway.", no_args_is_help=True)


def notify_settings(webhooks: list[str], config_file: Path | None) -> NotifySettings:
    """``irq serve``'s notification settings: the file's ``[notify]``, plus each --webhook
    (JSON body, every event kind)."""
    from console.notify_config import NotifySettings, WebhookConfig, load_notify_file

    try:
        settings = load_notify_file(config_file) if config_file else NotifySettings()
        extra = [WebhookConfig(url=url) for url in webhooks]
    except ValueError as exc:
        fail(ExitCode.USAGE, f"invalid notification settings: {exc}")
    return settings.model_copy(update={"webhooks": [*settings.webhooks, *extra]})


@notify_app.command("test", cls=IrqCommand)
def notify_test_command(
    ctx: typer.Context,
    webhook: Annotated[
        str | None,
        typer.Option("--webhook", help="Post the test message to this URL directly (no gateway).",
                     show_default=False),
    ] = None,
    slack: Annotated[bool, typer.Option("--slack", help="With --webhook: Slack body.")] = False,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """Send a test notification (through the gateway's webhooks, or to --webhook)."""
    if webhook is not None:
        results = run_async(_direct(webhook, "slack" if slack else "json"))
    else:
        conn = connection_of(ctx, url, token, context)

        async def ask(client: Any) -> Any:
            return await client.query("notify_test")

        results = with_gateway(conn, ask)
        if not results:
            fail(ExitCode.FAILED, "the gateway has no webhooks configured",
                 hint="start it with `irq serve --webhook URL` or `--notify-config FILE`")
    table = make_table("webhook", "result")
    for item in results:
        table.add_row(esc(item["url"]), "ok" if item["ok"] else esc(f"failed: {item['error']}"))
    emit(output, results, lambda: print_table(table))
    if not all(item["ok"] for item in results):
        raise typer.Exit(ExitCode.FAILED)


async def _direct(url: str, fmt: str) -> list[dict[str, Any]]:
    from console.gateway.webhooks import Webhooks
    from console.notify_config import NotifySettings, WebhookConfig

    try:
        hook = WebhookConfig(url=url, format=fmt)  # type: ignore[arg-type]
    except ValueError as exc:
        fail(ExitCode.USAGE, f"--webhook: {exc}")
    hooks = Webhooks(NotifySettings(webhooks=[hook]), "irq-cli", attempts=3)
    return await hooks.test()
