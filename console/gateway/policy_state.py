"""The gateway's policy: the file given to ``irq serve --policy FILE``, loaded at start and
reloaded when it changes.

The file is watched by polling (the gateway calls :meth:`PolicyState.poll` every second): a
change of mtime or size makes it read the file, and only a change of content (SHA-256) makes
it parse it. A file that parses replaces the policy at once; one that does not leaves the old
policy in force and sets :attr:`PolicyState.last_error` (the PolicyError's message names the
file, the rule and the key). The same bad content is reported once, not every second.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from console.model import utcnow
from console.policy.engine import PolicyEngine
from console.policy.loader import PolicyError, parse_policy


@dataclass(frozen=True)
class ReloadResult:
    """What a (re)load came to: ``changed`` when a new policy is in force, ``error`` (the
    PolicyError message) when the file was refused and the old policy kept."""

    changed: bool
    version: str | None
    error: str | None = None


class PolicyState:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.engine: PolicyEngine | None = None
        self.loaded_at: datetime | None = None
        self.last_error: str | None = None
        self._stat: tuple[int, int] | None = None  # (mtime_ns, size) last read
        self._digest: str | None = None  # SHA-256 of the content last read (good or bad)
        self._refused: PolicyError | None = None  # why the content last read was refused

    @property
    def version(self) -> str | None:
        return self.engine.version if self.engine is not None else None

    def load(self) -> None:
        """At start: load the file; PolicyError when it is unreadable or invalid."""
        if self.path is None:
            return
        self.reload(force=True)
        if self._refused is not None:
            raise self._refused

    def poll(self) -> ReloadResult | None:
        """Reload if the file's mtime or size changed since it was last read; None when they
        did not. A result with neither ``changed`` nor ``error`` means nothing to tell (same
        content, or the same refused content again)."""
        if self.path is None:
            return None
        try:
            st = self.path.stat()
            stat: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except OSError:
            stat = None
        if stat == self._stat:  # None == None: still missing, already reported
            return None
        return self.reload()

    def reload(self, *, force: bool = False) -> ReloadResult:
        """Read and parse the file now. Unchanged content is not parsed again unless
        ``force``; a refused file keeps the policy in force."""
        if self.path is None:
            return ReloadResult(False, None, "no policy file (irq serve --policy FILE)")
        try:
            st = self.path.stat()
            data = self.path.read_bytes()
        except OSError as exc:
            self._stat = None
            return self._refuse(PolicyError(str(self.path), "cannot read the policy file: "
                                            f"{exc.strerror or exc}"), None, force)
        self._stat = (st.st_mtime_ns, st.st_size)
        digest = hashlib.sha256(data).hexdigest()
        if digest == self._digest and not force:
            return ReloadResult(False, self.version)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return self._refuse(PolicyError(str(self.path), "not UTF-8 text"), digest, force)
        try:
            engine = PolicyEngine(parse_policy(text, str(self.path)))
        except PolicyError as exc:
            return self._refuse(exc, digest, force)
        self._digest = digest
        changed = engine.version != self.version
        self.engine, self.loaded_at, self.last_error = engine, utcnow(), None
        self._refused = None
        return ReloadResult(changed, engine.version)

    def _refuse(self, error: PolicyError, digest: str | None, force: bool) -> ReloadResult:
        repeated = digest is not None and digest == self._digest and not force
        self._digest, self._refused = digest, error
        self.last_error = message = str(error)
        return ReloadResult(False, self.version, None if repeated else message)

    # ------------------------------------------------------------------------- frames

    def agent_frame(self) -> dict[str, Any]:
        """The ``policy`` frame every agent connection gets after its hello and each reload."""
        engine = self.engine
        return {"type": "policy", "version": self.version,
                "policy": engine.policy.model_dump(mode="json") if engine else None}

    def summary(self) -> dict[str, Any]:
        """The ``policy`` client event (and the snapshot's ``policy``)."""
        engine = self.engine
        return {"version": self.version,
                "source": engine.policy.source if engine else "",
                "loaded_at": self.loaded_at.isoformat() if self.loaded_at else None,
                "rules": len(engine.policy.rules) if engine else 0}

    def describe(self) -> dict[str, Any]:
        """The answer to the ``policy`` query."""
        engine = self.engine
        return {**self.summary(), "last_error": self.last_error,
                "policy": engine.policy.model_dump(mode="json") if engine else None}
