"""The error every frame check raises, and the caps the command frames share.

Its own module so the frame parsers (``protocol``, ``policy_frames``) depend on it and not on
each other.
"""

from __future__ import annotations

MAX_TARGETS = 1000  # targets of one command, plan query or focus frame
MAX_REASON_CHARS = 2000  # a command's reason


class FrameError(Exception):
    """A frame that cannot be accepted. ``code`` goes into the error frame."""

    def __init__(self, code: str, message: str, ref: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.ref = ref
