"""terminal_safe: what a terminal would act on is shown, never passed through."""

from __future__ import annotations

import json
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from console.terminal_text import terminal_safe


def acts_on_terminal(char: str) -> bool:
    """C0/C1 controls and DEL (Cc), bidi controls, line/paragraph separators, surrogates."""
    category = unicodedata.category(char)
    if category in ("Cc", "Cs", "Zl", "Zp"):
        return True
    return unicodedata.bidirectional(char) in ("LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI",
                                               "FSI", "PDI", "LRM", "RLM", "ALM")


def test_escape_sequences_are_shown_as_backslash_escapes() -> None:
    assert terminal_safe("a\x1b]0;title\x07b") == "a\\x1b]0;title\\x07b"  # OSC 0
    assert terminal_safe("\x1b]52;c;cHduZWQ=\x07") == "\\x1b]52;c;cHduZWQ=\\x07"  # OSC 52
    assert terminal_safe("\x1b[2J") == "\\x1b[2J"
    assert terminal_safe("x\x9b2J\x9d0;t\x9c") == "x\\x9b2J\\x9d0;t\\x9c"  # C1 CSI, OSC, ST
    assert terminal_safe("deploy\u202eved") == "deploy\\u202eved"  # bidi override
    assert terminal_safe("\x7f\x00") == "\\x7f\\x00"
    assert terminal_safe("\ud800") == "\\ud800"  # a lone surrogate (cannot even be encoded)


def test_one_line_shows_newlines_and_tabs_a_block_keeps_them() -> None:
    assert terminal_safe("name\nFAKE LINE\tx\r") == "name\\nFAKE LINE\\tx\\r"
    assert terminal_safe("line 1\r\nline 2\tx\ry", multiline=True) == "line 1\nline 2\tx\\ry"


def test_ordinary_text_is_unchanged() -> None:
    for text in ("wf-42", "billing · 3/4", "café ✓ 日本語 🙂", "C:\\path", "", "\u00a0nbsp"):
        assert terminal_safe(text) == text
        assert terminal_safe(text, multiline=True) == text


@given(st.text(alphabet=st.characters(blacklist_categories=()), max_size=60))
def test_nothing_a_terminal_acts_on_survives(text: str) -> None:
    for multiline in (False, True):
        shown = terminal_safe(text, multiline=multiline)
        kept = {"\n", "\t"} if multiline else set()
        assert not [c for c in shown if acts_on_terminal(c) and c not in kept], repr(shown)
        shown.encode("utf-8")  # printable on any UTF-8 terminal: no lone surrogate left


@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp", "Cf")),
               max_size=60))
def test_text_without_controls_is_shown_as_it_is(text: str) -> None:
    assert terminal_safe(text) == text
    json.dumps(text)
