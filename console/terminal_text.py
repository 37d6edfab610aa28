"""Text from agents, backends and other clients, made inert before it reaches a terminal.

A run name, an interrupt title, a step name, a resource kind, a heartbeat detail, a backend's
error message or another operator's reason is foreign text: whoever wrote it may have put
escape sequences in it. Printed raw, ``ESC ] 0 ; … BEL`` retitles the operator's window,
``ESC ] 52 ; c ; …`` writes their clipboard, ``ESC [ 2 J`` wipes the screen, and a C1
control such as U+009B (a one-character CSI) does the same without an ESC. Bidi overrides
(U+202A–U+202E, U+2066–U+2069) reorder what follows them, so ``approve`` can be made to
look like something else.

:func:`terminal_safe` is the one rule for all of it: every such character is replaced by a
visible escape (``\\x1b``, ``\\x9b``, ``\\u202e``, ``\\n``), so the operator sees that it was
there and the terminal never interprets it. The CLI and the TUI call it where foreign text
enters their rendering; JSON output is escaped by the JSON encoder instead.

Pure: no imports beyond ``re``, so every layer may use it.
"""

from __future__ import annotations

import re

# Characters a terminal may act on, or that change how the text around them is displayed:
# C0 controls (ESC, BEL, CR, BS, ...), DEL, C1 controls (U+0080-U+009F: CSI, OSC, DCS, ST,
# ... as single characters), the Arabic letter mark, LRM/RLM, the line and paragraph
# separators, bidi embeddings/overrides/isolates, and lone surrogates (from JSON "\ud800";
# they cannot even be encoded for output).
_INVISIBLE = (
    "\x7f-\x9f"
    "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    "\ud800-\udfff"
)
#: one line: newlines and tabs are shown too (a name must not forge a second line)
UNSAFE_IN_LINE = re.compile(f"[\x00-\x1f{_INVISIBLE}]")
#: several lines (a description, a JSON document): newline and tab keep their meaning
UNSAFE_IN_BLOCK = re.compile(f"[\x00-\x08\x0b-\x1f{_INVISIBLE}]")

_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_safe(text: str, *, multiline: bool = False) -> str:
    """``text`` with every control, bidi-override and separator character made visible.

    ``multiline=False`` (names, titles, ids, reasons, table cells): newline and tab are
    shown as ``\\n`` and ``\\t`` as well. ``multiline=True`` (descriptions, documents):
    newline and tab stay, ``\\r\\n`` becomes a newline, a lone ``\\r`` is shown.
    """
    if text.isascii() and text.isprintable():
        return text  # the common case, checked in C
    if multiline:
        return UNSAFE_IN_BLOCK.sub(_visible, text.replace("\r\n", "\n"))
    return UNSAFE_IN_LINE.sub(_visible, text)


def osc_safe(text: str, *, limit: int = 200) -> str:
    """``text`` fit to travel inside an OSC string (a desktop notification's title or body):
    every control character made visible (so none ends the OSC early or starts another),
    ``;`` (the OSC 777 field separator) shown as ``,``, at most ``limit`` characters."""
    safe = terminal_safe(text).replace(";", ",")
    return safe if len(safe) <= limit else safe[: limit - 3] + "..."
