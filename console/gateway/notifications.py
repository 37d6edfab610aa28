"""Which gateway events call for a human: the hub's event stream, classified.

A notification is raised for: a new pending interrupt (``interrupt``), a run that turned
``late`` or ``lost`` (a transition, not every event of a run already in that state), a
suspected leak after pause/cancel (``leak``, from the hub's warning notice), an obligation
that went overdue (``obligation``) and an alert raised (its kind: ``interrupt_overdue``,
``stalled``, ...; once per alert, not while it is silenced). The classifier keeps only what
it needs to see transitions (the last state per run, the interrupts already announced),
bounded. Used by the
gateway's webhooks and by the TUI (same events on both sides of the wire).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from console.model import utcnow

MAX_TRACKED = 100_000  # runs / interrupts remembered for transition detection


@dataclass(frozen=True)
class Notification:
    kind: str  # interrupt | late | lost | leak | obligation | test | an alert kind
    run_id: str | None
    title: str
    message: str
    at: datetime
    alert: dict[str, Any] | None = None  # an alert's contract (alert kinds)

    def body(self, gateway: str) -> dict[str, Any]:
        """The JSON webhook body (stable; README "Notifications"). An alert's adds
        ``alert`` (its contract) and, for ``interrupt_overdue``, ``interrupt_id``."""
        body: dict[str, Any] = {"kind": self.kind, "at": self.at.isoformat(),
                                "run_id": self.run_id,
                "title": self.title, "message": self.message, "gateway": gateway}
        if self.alert is not None:
            body["alert"] = self.alert
            if self.kind == "interrupt_overdue":
                body["interrupt_id"] = self.alert.get("subject")
        return body

    def slack_body(self, gateway: str) -> dict[str, Any]:
        """Slack's ``{"text": ...}``; agent text escaped (``&`` ``<`` ``>``) so a run name
        cannot mention ``<!channel>`` or forge a link."""
        return {"text": f"*{_slack(self.title)}*\n{_slack(self.message)}\n"
                        f"_irq gateway {_slack(gateway)}_"}


class _Bounded(OrderedDict[str, str]):
    def put(self, key: str, value: str) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > MAX_TRACKED:
            self.popitem(last=False)


class EventClassifier:
    def __init__(self) -> None:
        self._run_state = _Bounded()
        self._announced = _Bounded()  # interrupt ids already notified

    def seed(self, run_states: dict[str, str], pending_interrupts: list[str],
             alerts: list[str] | None = None) -> None:
        """What is already known (a client's snapshot): no notification for it."""
        for alert_id in alerts or ():
            self._announced.put(f"al:{alert_id}", "open")
        for run_id, state in run_states.items():
            self._run_state.put(run_id, state)
        for iid in pending_interrupts:
            self._announced.put(iid, "pending")

    def classify(self, event: dict[str, Any]) -> Notification | None:
        kind, data = event.get("kind"), event.get("data")
        if not isinstance(data, dict):
            return None
        now = utcnow()
        if kind == "run":
            return self._run(data, now)
        if kind == "run_removed":
            self._run_state.pop(str(data.get("id")), None)
            return None
        if kind == "interrupt":
            return self._interrupt(data, now)
        if kind == "alert":
            return self._alert(data, now)
        if kind == "obligation" and data.get("state") == "overdue":
            key = f"ob:{data.get('id')}"
            if key in self._announced:
                return None
            self._announced.put(key, "overdue")
            return Notification("obligation", _str(data.get("run_id")), "Obligation overdue",
                                f"{data.get('id')}: {data.get('what', '')} (rule "
                                f"{data.get('rule', '')})", now)
        if (kind == "notice" and data.get("level") == "warning"
                and "suspected leak" in str(data.get("message", ""))):
            return Notification("leak", _str(data.get("run_id")), "Suspected leak",
                                str(data.get("message")), now)
        return None

    def _run(self, data: dict[str, Any], now: datetime) -> Notification | None:
        run_id, state = str(data.get("id")), str(data.get("state"))
        old = self._run_state.get(run_id)
        self._run_state.put(run_id, state)
        if state not in ("late", "lost") or old == state:
            return None
        name = data.get("name") or run_id
        return Notification(state, run_id, f"Run {state}",
                            f"{name} ({run_id}) turned {state}", now)

    def _alert(self, data: dict[str, Any], now: datetime) -> Notification | None:
        """An alert raised (once per alert id; not when it is silenced, acknowledged or
        cleared, nor for an alert already known from a snapshot)."""
        key = f"al:{data.get('id')}"
        if data.get("state") != "open" or key in self._announced:
            return None
        self._announced.put(key, "open")
        until = data.get("silenced_until")
        if isinstance(until, str) and until > now.isoformat():
            return None
        kind = str(data.get("kind"))
        title = ("Interrupt overdue" if kind == "interrupt_overdue"
                 else "Alert: " + kind.replace("_", " "))
        action = f" -- {data.get('action')}" if data.get("action") else ""
        return Notification(kind, _str(data.get("run")), title,
                            f"{data.get('detail', '')}{action} (alert {data.get('id')})", now,
                            alert=dict(data))

    def _interrupt(self, data: dict[str, Any], now: datetime) -> Notification | None:
        iid = str(data.get("id"))
        if data.get("status") != "pending" or iid in self._announced:
            return None
        self._announced.put(iid, "pending")
        return Notification("interrupt", _str(data.get("run_id")), "New interrupt",
                            f"{data.get('title') or iid} ({data.get('run_id')}): {iid}", now)


def _slack(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _str(value: Any) -> str | None:
    return None if value is None else str(value)
