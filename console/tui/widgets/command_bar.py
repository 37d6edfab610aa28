"""The bottom input for ``/`` (filter, applied as you type) and ``:`` (commands)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.suggester import SuggestFromList
from textual.widgets import Input, Static

from console.tui.command_line import completions


class CommandBar(Horizontal):
    """Zero height until opened; Enter submits, Esc closes (a filter keeps what was typed).

    It is never ``display: none``: a hidden widget cannot take focus synchronously."""

    BINDINGS = [Binding("escape", "close", "Close", show=False, id="bar_close")]

    DEFAULT_CSS = """
    CommandBar { height: 0; background: $boost; }
    CommandBar.-open { height: 1; }
    CommandBar > #prompt { width: 2; text-style: bold; color: $accent; }
    CommandBar > Input { width: 1fr; }
    """

    class Submitted(Message):
        def __init__(self, mode: str, text: str) -> None:
            super().__init__()
            self.mode = mode
            self.text = text

    class FilterChanged(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class Closed(Message):
        pass

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.mode = "command"

    def compose(self) -> ComposeResult:
        yield Static(":", id="prompt")
        field = Input(compact=True, id="bar-input",
                      suggester=SuggestFromList([f"{c} " for c in completions()]))
        field.cursor_blink = False
        yield field

    @property
    def input(self) -> Input:
        return self.query_one("#bar-input", Input)

    @property
    def is_open(self) -> bool:
        return self.has_class("-open")

    def open(self, mode: str, text: str = "") -> None:
        self.mode = mode
        self.query_one("#prompt", Static).update("/" if mode == "filter" else ":")
        self.input.suggester = (
            None if mode == "filter"
            else SuggestFromList([f"{c} " for c in completions()], case_sensitive=False)
        )
        self.input.value = text
        self.input.cursor_position = len(text)
        self.add_class("-open")
        # focus now, not after the next refresh: over SSH the keys typed after '/' often
        # arrive in the same packet and must land in the input, not on the table
        self.screen.set_focus(self.input)

    def action_close(self) -> None:
        self.remove_class("-open")
        self.input.value = ""
        self.post_message(self.Closed())

    @on(Input.Changed, "#bar-input")
    def _changed(self, event: Input.Changed) -> None:
        event.stop()
        if self.mode == "filter":
            self.post_message(self.FilterChanged(event.value))

    @on(Input.Submitted, "#bar-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.remove_class("-open")
        self.post_message(self.Submitted(self.mode, event.value))
