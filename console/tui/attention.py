"""Calling the operator: the terminal bell and desktop notifications through the terminal,
and copying the selected id to the clipboard (OSC 52).

The TUI classifies the gateway events it receives the same way the gateway's webhooks do
(:class:`console.gateway.notifications.EventClassifier`): a new pending interrupt, a run
turned ``late``/``lost``, a suspected leak, an overdue obligation. Each kind rings the bell
(BEL) and/or raises a desktop notification (``ESC ] 9 ; TEXT BEL``, or ``ESC ] 777 ; notify ;
TITLE ; BODY BEL``) only when the config file's ``[notify]`` section asks for it (``bell =
["interrupt", "lost"]``, ``desktop = ["interrupt"]``, ``osc = "9"``); everything is off by
default. A flood is rate-limited per kind (``per_kind`` per ``window_s``) and summarised once.
Agent text never reaches the OSC raw (:func:`console.terminal_text.osc_safe`).

Sequences go to the terminal through Textual's driver (what Textual's own ``App.bell`` and
``App.copy_to_clipboard`` use; ``App.bell`` itself stays silent on a headless driver, so the
bell is written the same way): :func:`console.tui.textual_internals.write_to_terminal`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual.binding import Binding

from console.gateway.notifications import EventClassifier, Notification
from console.model import utcnow
from console.notify_config import NotifySettings
from console.notify_rate import KindRateLimiter
from console.terminal_text import osc_safe, terminal_safe
from console.tui.textual_internals import write_to_terminal

if TYPE_CHECKING:
    from textual.app import App

    from console.tui.screens.base import ViewScreen

BEL = "\x07"
#: ``y`` on the fleet and inbox screens (listed by the help screen)
COPY_ID_BINDING = Binding("y", "copy_id", "copy id", show=False, id="copy_id")


def desktop_sequence(osc: str, title: str, body: str) -> str:
    """The OSC that asks the terminal for a desktop notification (text made safe here)."""
    if osc == "777":
        return f"\x1b]777;notify;{osc_safe(title, limit=80)};{osc_safe(body)}{BEL}"
    return f"\x1b]9;{osc_safe(f'{title}: {body}')}{BEL}"


class Attention:
    def __init__(self, app: App[Any], settings: NotifySettings | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self.settings = settings or NotifySettings()
        self.classifier = EventClassifier()
        self.limiter = KindRateLimiter(self.settings.per_kind, self.settings.window_s, clock)
        self.alerts = 0  # notifications written to the terminal (summaries included)

    @property
    def enabled(self) -> bool:
        return bool(self.settings.bell or self.settings.desktop)

    def observe(self, events: list[dict[str, Any]], view: Any) -> None:
        """One batch of gateway events the client applied (``view``: its FleetView)."""
        if not self.enabled:
            return
        for event in events:
            if event.get("kind") == "snapshot":  # what is already there calls nobody
                self.classifier.seed(
                    {rid: run.state.value for rid, run in view.runs.items()},
                    [iid for iid, i in view.interrupts.items() if i.status == "pending"],
                    list(view.alerts))
                continue
            note = self.classifier.classify(event)
            if note is None or not self._wanted(note.kind):
                continue
            if self.limiter.admit(note.kind):
                self.alert(note)

    def tick(self) -> None:
        """Once a second: the summary of each kind whose window held alerts back."""
        for summary in self.limiter.summaries():
            self.alert(Notification(summary.kind, None, "irq", summary.message, utcnow()))

    def _wanted(self, kind: str) -> bool:
        return kind in self.settings.bell or kind in self.settings.desktop

    def alert(self, note: Notification) -> None:
        out = BEL if note.kind in self.settings.bell else ""
        if note.kind in self.settings.desktop:
            out += desktop_sequence(self.settings.osc, f"irq: {note.title}", note.message)
        if out:
            self.alerts += 1
            self.write(out)

    def write(self, data: str) -> None:
        write_to_terminal(self.app, data)

    # ------------------------------------------------------------------ OSC 52

    def copy_selected(self, screen: ViewScreen) -> None:
        """``y``: the selected interrupt's id on the inbox, the selected run's id elsewhere
        (the marked runs' ids, space-separated, when rows are marked)."""
        intr = screen.selected_interrupt() if screen.VIEW_NAME == "inbox" else None
        ids = [intr.id] if intr is not None else screen.selected_run_ids()
        if not ids:
            self.app.notify("nothing selected to copy", severity="warning")
            return
        text = " ".join(ids)
        self.app.copy_to_clipboard(text)  # OSC 52: works over SSH, no clipboard daemon
        self.app.notify(f"copied {terminal_safe(text)} to the clipboard (OSC 52)", timeout=3)
