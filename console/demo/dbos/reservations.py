"""A file-backed reservation board: the demo's "real" resources (GPU slices, locks, ...).

Each reservation is a small JSON file naming its owner (a workflow id). Reserving is
idempotent for the same owner (an agent re-acquires on every execution) and freeing only
frees what the caller owns, so an old execution can never free a newer one's reservation.
Every change is appended to an optional JSON-lines log, which tests read to confirm releases.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any, Literal

from backend_adapters.dbos.agent import AgentResource


def append_log(path: str | Path | None, **fields: Any) -> None:
    """Append one JSON line (atomic for short lines with O_APPEND)."""
    if not path:
        return
    line = json.dumps({"t": round(time.time(), 3), "pid": os.getpid(), **fields}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def read_log(path: str | Path) -> list[dict[str, Any]]:
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


class ReservationBoard:
    def __init__(self, root: str | Path, *, log: str | Path | None = None) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.log = log

    def _file(self, kind: str, rid: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{kind}--{rid}")
        return self.root / f"{safe}.json"

    def holder(self, kind: str, rid: str) -> str | None:
        try:
            owner = json.loads(self._file(kind, rid).read_text()).get("owner")
        except (OSError, ValueError, AttributeError):  # AttributeError: not a JSON object
            return None
        return owner if isinstance(owner, str) else None

    def reserve(self, kind: str, rid: str, owner: str) -> None:
        current = self.holder(kind, rid)
        if current == owner:
            append_log(self.log, event="reserve", kind=kind, id=rid, owner=owner, already=True)
            return
        path = self._file(kind, rid)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"owner": owner, "pid": os.getpid(), "at": time.time()}))
        os.replace(tmp, path)
        append_log(self.log, event="reserve", kind=kind, id=rid, owner=owner, took_from=current)

    def free(self, kind: str, rid: str, owner: str) -> None:
        if self.holder(kind, rid) != owner:
            return
        self._file(kind, rid).unlink(missing_ok=True)
        append_log(self.log, event="release", kind=kind, id=rid, owner=owner)

    def resource(
        self,
        rid: str,
        *,
        kind: str,
        owner: str,
        on_pause: Literal["keep", "release"] = "keep",
        on_cancel: Literal["release", "keep"] = "release",
        detail: str = "",
    ) -> AgentResource:
        return AgentResource(
            id=rid,
            kind=kind,
            on_pause=on_pause,
            on_cancel=on_cancel,
            detail=detail,
            acquire=lambda: self.reserve(kind, rid, owner),
            release=lambda: self.free(kind, rid, owner),
        )
