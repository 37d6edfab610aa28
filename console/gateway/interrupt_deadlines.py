"""Interrupt deadlines the gateway gives: an interrupt without one (the agent or the native
wait gave none) gets ``created_at`` + the default of its context (``interrupt_deadline`` in
the config file's context, ``irq serve --interrupt-deadline``). Applied where interrupts are
indexed (the hub's overlay), so clients see the deadline and every gateway on one journal
computes the same one. A deadline the agent gave is kept as it is."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from console.model import Interrupt


class InterruptDeadlines:
    def __init__(self, default_s: float | None,
                 per_context: Mapping[str, float] | None = None) -> None:
        """``per_context``: ``BACKEND:CONTEXT`` -> seconds, over ``default_s``."""
        self.default_s = default_s
        self.per_context = dict(per_context or {})

    def deadline_s(self, intr: Interrupt) -> float | None:
        return self.per_context.get(intr.run_id.split("/", 1)[0], self.default_s)

    def apply(self, intr: Interrupt) -> Interrupt:
        if intr.deadline_at is not None or intr.status != "pending":
            return intr
        seconds = self.deadline_s(intr)
        if seconds is None:
            return intr
        return intr.model_copy(update={
            "deadline_at": intr.created_at + timedelta(seconds=seconds)})
