"""Webhooks: notifications posted from the gateway (``irq serve --webhook URL`` /
``--notify-config FILE``), never blocking the hub.

The hub calls :meth:`Webhooks.observe` for every event it publishes (synchronously, so it
only classifies, rate-limits and puts the message on a bounded queue). A sender task posts
each message with httpx, retried with exponential backoff by tenacity; a receiver that stays
down costs its retries, then the message is dropped with a log line and counted (``query
what=stats`` -> ``notifications``). A full queue drops too (counted), the hub never waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from console.gateway.notifications import EventClassifier, Notification
from console.model import utcnow
from console.notify_config import NotifySettings, WebhookConfig
from console.notify_rate import KindRateLimiter

log = logging.getLogger("irq.gateway.webhooks")

QUEUE_SIZE = 1000
TIMEOUT_S = 5.0


class ReceiverError(Exception):
    """The receiver answered with a status that is worth a retry (5xx, 429)."""


@dataclass(frozen=True)
class Delivery:
    hook: WebhookConfig
    note: Notification


def webhook_payload(hook: WebhookConfig, note: Notification, gateway: str) -> dict[str, Any]:
    return note.slack_body(gateway) if hook.format == "slack" else note.body(gateway)


class Webhooks:
    def __init__(self, settings: NotifySettings, gateway: str, *, attempts: int = 5,
                 backoff_s: float = 0.5, max_backoff_s: float = 30.0) -> None:
        self.settings = settings
        self.gateway = gateway
        self.attempts, self.backoff_s, self.max_backoff_s = attempts, backoff_s, max_backoff_s
        self.classifier = EventClassifier()
        self.limiter = KindRateLimiter(settings.per_kind, settings.window_s)
        self.queue: asyncio.Queue[Delivery] = asyncio.Queue(maxsize=QUEUE_SIZE)
        self.counters: Counter[str] = Counter()
        self._client: httpx.AsyncClient | None = None

    @property
    def hooks(self) -> list[WebhookConfig]:
        return self.settings.webhooks

    # ------------------------------------------------------------- from the hub (sync)

    def observe(self, event: dict[str, Any]) -> None:
        try:
            self._observe(event)
        except Exception:  # a notification bug must never break the hub's publish
            self.counters["errors"] += 1
            log.exception("classifying a %s event for webhooks failed", event.get("kind"))

    def _observe(self, event: dict[str, Any]) -> None:
        note = self.classifier.classify(event)
        if note is None:
            return
        if not any(note.kind in hook.events for hook in self.hooks):
            return
        if not self.limiter.admit(note.kind):
            self.counters["rate_limited"] += 1
            return
        self._enqueue(note)

    def flush_summaries(self) -> None:
        """Called every second: the summary of each kind whose window held events back."""
        for summary in self.limiter.summaries():
            self._enqueue(Notification(summary.kind, None, f"More {summary.kind} events",
                                       summary.message, utcnow()))

    def _enqueue(self, note: Notification) -> None:
        for hook in self.hooks:
            if note.kind not in hook.events and note.kind != "test":
                continue
            try:
                self.queue.put_nowait(Delivery(hook, note))
                self.counters["queued"] += 1
            except asyncio.QueueFull:
                self.counters["dropped_queue_full"] += 1
                log.warning("webhook queue full: dropped a %s notification for %s",
                            note.kind, hook.url)

    # ------------------------------------------------------------------- the sender

    async def run(self) -> None:
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as client:
            self._client = client
            while True:
                delivery = await self.queue.get()
                try:
                    await self.deliver(delivery.hook, delivery.note)
                except Exception as exc:  # retries exhausted: drop, count, keep going
                    self.counters["dropped"] += 1
                    log.warning("webhook %s: dropped a %s notification after %d attempts: %s",
                                delivery.hook.url, delivery.note.kind, self.attempts, exc)

    async def deliver(self, hook: WebhookConfig, note: Notification) -> int:
        """POST with retries; the final status code, or the last error raised."""
        client = self._client
        own = client is None
        if client is None:
            client = httpx.AsyncClient(timeout=TIMEOUT_S)
        try:
            headers = hook.headers()
            payload = webhook_payload(hook, note, self.gateway)
            retrying = AsyncRetrying(
                stop=stop_after_attempt(self.attempts),
                wait=wait_exponential(multiplier=self.backoff_s, max=self.max_backoff_s),
                retry=retry_if_exception_type((httpx.TransportError, ReceiverError)),
                before_sleep=self._count_retry, reraise=True)
            async for attempt in retrying:
                with attempt:
                    response = await client.post(hook.url, json=payload, headers=headers)
                    if response.status_code >= 500 or response.status_code == 429:
                        raise ReceiverError(f"HTTP {response.status_code}")
            if response.status_code >= 400:
                self.counters["rejected"] += 1
                log.warning("webhook %s refused a %s notification: HTTP %d", hook.url,
                            note.kind, response.status_code)
            else:
                self.counters["sent"] += 1
            return response.status_code
        finally:
            if own:
                with contextlib.suppress(Exception):
                    await client.aclose()

    def _count_retry(self, state: RetryCallState) -> None:
        self.counters["retries"] += 1

    async def test(self) -> list[dict[str, Any]]:
        """``notify_test``: one test message to every webhook, now; a result per webhook."""
        note = Notification("test", None, "irq test notification",
                            f"a test notification from the irq gateway {self.gateway}", utcnow())
        results: list[dict[str, Any]] = []
        for hook in self.hooks:
            try:
                status = await self.deliver(hook, note)
                results.append({"url": hook.url, "ok": status < 400, "status": status,
                                "error": None if status < 400 else f"HTTP {status}"})
            except Exception as exc:
                results.append({"url": hook.url, "ok": False, "status": None,
                                "error": f"{type(exc).__name__}: {exc}"})
        return results

    def stats(self) -> dict[str, Any]:
        return {"webhooks": len(self.hooks), "queue": self.queue.qsize(), **self.counters}
