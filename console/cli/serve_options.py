"""``irq serve``'s upkeep and alert options (retention, prices, deadlines, alert timing),
declared once here so the command stays a list of names."""

from __future__ import annotations

from typing import Annotated

import typer

RetentionOption = Annotated[
    str | None,
    typer.Option("--retention", show_default=False,
                 help="Prune decided approvals, settled obligations and cleared alerts from the "
                 "journal after this long (e.g. 30d); the audit trail stays. Default: the "
                 "context's retention, else 30d."),
]
PriceOption = Annotated[
    list[str] | None,
    typer.Option("--price", show_default=False,
                 help="Price per hour of one unit of a resource kind, KIND=AMOUNT "
                 "(repeatable, e.g. gpu=2.50): plans show the work at risk in money. "
                 "Over the config file's [prices]."),
]
InterruptDeadlineOption = Annotated[str | None, typer.Option(
    "--interrupt-deadline", metavar="DURATION", show_default=False,
    help="Deadline for interrupts without one (e.g. 8s, 24h): past it, interrupt_overdue. "
    "Default: the context's interrupt_deadline, else none.")]
AlertGraceOption = Annotated[str | None, typer.Option(
    "--alert-grace", metavar="DURATION", show_default=False,
    help="How long a condition holds before its alert is raised, or is gone before it "
    "clears (default 5s).")]
StalledAfterOption = Annotated[str | None, typer.Option(
    "--stalled-after", metavar="DURATION", show_default=False,
    help="Fresh heartbeats, progress unmoved this long: stalled (default: the context's "
    "stalled_after, else 10m).")]
RetryingAfterOption = Annotated[int | None, typer.Option(
    "--retrying-after", metavar="N", min=1, show_default=False,
    help="A step failing this many attempts in a row and backing off: retrying (default: the "
    "context's retrying_after, else 3).")]
ShedAfterOption = Annotated[float | None, typer.Option(
    "--shed-after", metavar="SECONDS", min=0.0, show_default=False,
    help="A client this many seconds behind (beyond the beats' flush interval) is sent state "
    "changes only, its heartbeat-age updates shed, until it has caught up for --shed-hold; 0: "
    "never shed (default 0.15).")]
ShedHoldOption = Annotated[float | None, typer.Option(
    "--shed-hold", metavar="SECONDS", min=0.0, show_default=False,
    help="How long a shedding client must stay within half the --shed-after threshold before "
    "it gets every beat again (default 5; shorter: fresher ages sooner, more back and forth "
    "under load).")]
MetricsOption = Annotated[bool, typer.Option(
    "--metrics/--no-metrics",
    help="Serve Prometheus metrics at /metrics on the gateway's own listener (beside /healthz "
    "and /readyz).")]
MetricsTokenOption = Annotated[str | None, typer.Option(
    "--metrics-token", envvar="IRQ_METRICS_TOKEN", show_default=False,
    help="Bearer token /metrics asks for (Authorization: Bearer TOKEN). Default: none, "
    "anyone who reaches the listener may scrape (docs/reliability.md).")]
