"""Preempting the demo's own workers on request: the demo side of ``irq drill``.

``irq demo`` gives its context a ``preempt_command`` that runs this module::

    python -m console.demo.preemption --dir DEMO/preempt {backend} {native_id}

It drops a request file into ``DIR/BACKEND/`` and waits for the answer. The process that
started the workers answers it: the DBOS demo fleet (``console.demo.dbos.fleet``) looks up the
executor of the workflow in its own system database, SIGKILLs that worker -- a process it
started itself, by its pid -- and restarts it after its downtime, like the preemptions it
makes on its own. Nothing here kills anything by name, and nothing but the process that
started a worker kills it.

Request ``ID.req`` (JSON ``{"native_id": ...}``) -> answer ``ID.done`` (JSON ``{"ok": bool,
"detail": str}``); both are written atomically (a temporary file renamed into place).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import sqlite3
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

    from console.demo.dbos.fleet import Fleet
    from console.processes import ChildProcess

#: backends whose demo processes answer preemption requests
ANSWERED = ("dbos", "temporal", "restate")
#: workers the launcher itself started and restarts when asked: backend -> child name
LAUNCHER_WORKERS = {"temporal": "t-worker", "restate": "rs-svc"}
ANSWER_TIMEOUT_S = 20.0


def control_dir(demo_dir: Path) -> Path:
    return demo_dir / "preempt"


def preempt_command(demo_dir: Path, python: str = sys.executable) -> str:
    """The demo context's ``preempt_command`` template."""
    base = shlex.join([python, "-m", "console.demo.preemption", "--dir",
                       str(control_dir(demo_dir))])
    return base + " {backend} {native_id}"


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)


def request_preempt(
    directory: Path, backend: str, native_id: str, timeout_s: float = ANSWER_TIMEOUT_S
) -> tuple[bool, str]:
    """Ask the demo process of ``backend`` to preempt the worker of ``native_id``."""
    if backend not in ANSWERED:
        return False, f"the demo preempts {', '.join(ANSWERED)} workers only, not {backend}"
    inbox = directory / backend
    inbox.mkdir(parents=True, exist_ok=True)
    name = secrets.token_hex(8)
    _write_json(inbox / f"{name}.req", {"native_id": native_id})
    answer = inbox / f"{name}.done"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if answer.exists():
            data = json.loads(answer.read_text(encoding="utf-8"))
            answer.unlink(missing_ok=True)
            return bool(data.get("ok")), str(data.get("detail", ""))
        time.sleep(0.1)
    (inbox / f"{name}.req").unlink(missing_ok=True)
    return False, f"no demo {backend} fleet answered within {timeout_s:g}s (is irq demo running?)"


def pending_requests(directory: Path, backend: str) -> list[tuple[Path, str]]:
    """The unanswered requests for ``backend``: (request file, native id)."""
    out: list[tuple[Path, str]] = []
    inbox = directory / backend
    if not inbox.is_dir():
        return out
    for path in sorted(inbox.glob("*.req")):
        try:
            native_id = str(json.loads(path.read_text(encoding="utf-8"))["native_id"])
        except (OSError, ValueError, KeyError, TypeError):
            native_id = ""
        out.append((path, native_id))
    return out


def answer(request: Path, ok: bool, detail: str) -> None:
    _write_json(request.with_suffix(".done"), {"ok": ok, "detail": detail})
    request.unlink(missing_ok=True)


def dbos_executor_of(db: Path, workflow_id: str) -> str | None:
    """The executor (worker) DBOS assigned the workflow to, from its system database."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        row = conn.execute(
            "SELECT executor_id FROM workflow_status WHERE workflow_uuid = ?", (workflow_id,)
        ).fetchone()
    return str(row[0]) if row and row[0] else None


def serve_fleet_requests(fleet: Fleet) -> None:
    """Answer the DBOS demo fleet's pending requests (called from its supervision loop)."""
    directory = control_dir(fleet.db.parent)
    for request, native_id in pending_requests(directory, "dbos"):
        try:
            executor = dbos_executor_of(fleet.db, native_id) if native_id else None
        except sqlite3.Error as exc:
            answer(request, False, f"cannot read {fleet.db}: {exc}")
            continue
        worker = next((w for w in fleet.members if w.executor_id == executor), None)
        if worker is None:
            answer(request, False, f"no worker of this fleet runs {native_id!r}")
            continue
        process = worker.process
        if process is None or not process.alive():
            answer(request, False, f"{worker.executor_id} is already down")
            continue
        pid = process.pid
        fleet.preempt(worker)
        answer(request, True, f"SIGKILL {worker.executor_id} (pid {pid}); restarts in "
                              f"{fleet.downtime_s:g}s")


def serve_launcher_requests(directory: Path, children: Iterable[ChildProcess]) -> None:
    """Answer requests for the workers ``irq demo`` started itself (the Temporal worker runs
    every Temporal run of the demo, rs-svc every Restate handler): SIGKILL it by its pid and
    start it again at once."""
    by_name = {child.name: child for child in children}
    for backend, name in LAUNCHER_WORKERS.items():
        for request, _native_id in pending_requests(directory, backend):
            child = by_name.get(name)
            if child is None or not child.alive():
                answer(request, False, f"the demo's {name} is not running")
                continue
            pid = child.pid
            child.kill()
            child.stop(5.0)  # reaps it (and closes its log)
            child.start()
            answer(request, True, f"SIGKILL {name} (pid {pid}); restarted as pid {child.pid}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m console.demo.preemption",
        description="Ask the running irq demo to preempt the worker of one run.",
    )
    parser.add_argument("--dir", type=Path, required=True, help="the demo's preempt directory")
    parser.add_argument("backend")
    parser.add_argument("native_id")
    args = parser.parse_args(argv)
    ok, detail = request_preempt(args.dir, args.backend, args.native_id)
    print(detail, file=sys.stdout if ok else sys.stderr, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
