"""Keys typed ahead must follow the focus.

Textual queues each key on the widget that had focus when the key arrived. Over SSH the keys
after ``/`` or ``:`` often arrive in the same packet, so they sit in the table's queue while
``/`` moves focus to the command bar, and would be lost (or, worse, run as actions on the
selected row). Widgets with this mixin hand such keys on to whatever has focus now.
"""

from __future__ import annotations

from textual import events
from textual.widget import Widget


class FollowFocus(Widget):
    async def _on_key(self, event: events.Key) -> None:
        focused = self.screen.focused if self.is_attached else None
        if focused is not None and focused is not self:
            event.stop()
            event.prevent_default()
            focused.post_message(events.Key(event.key, event.character))
            return
        await super()._on_key(event)
