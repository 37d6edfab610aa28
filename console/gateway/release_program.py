"""Running a resource kind's ``release_command`` (``[resources.KIND]`` in the config file)
for ``irq release RUN RESOURCE --force``.

An argv, never a shell: the run id and the resource id are appended as the last two
arguments, and the environment says them again (``IRQ_RUN_ID``, ``IRQ_RESOURCE_ID``,
``IRQ_RESOURCE_KIND``, and ``IRQ_RELEASE_KEY``, the command's idempotency key: a re-drive
after a gateway crash runs the program again under the same key). stdout and stderr are
read together; the last lines go into the result and the audit. Past its timeout the
program is killed (by its pid: it is our child) and the release counts as failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass, field

from console.release_outcome import OUTPUT_LINES

RELEASE_TIMEOUT_S = 60.0
MAX_OUTPUT_BYTES = 64 * 1024  # what is kept of a chatty program's output (its end)


@dataclass(frozen=True)
class ProgramRun:
    argv: list[str]
    exit_code: int | None  # None: it did not start, or was killed at the timeout
    output: list[str] = field(default_factory=list)  # its last lines
    error: str = ""  # why there is no exit code

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0


def release_argv(program: list[str], run_id: str, resource_id: str) -> list[str]:
    return [*program, run_id, resource_id]


async def run_release_program(program: list[str], *, run_id: str, resource_id: str,
                              kind: str, key: str,
                              timeout_s: float = RELEASE_TIMEOUT_S) -> ProgramRun:
    argv = release_argv(program, run_id, resource_id)
    env = {**os.environ, "IRQ_RUN_ID": run_id, "IRQ_RESOURCE_ID": resource_id,
           "IRQ_RESOURCE_KIND": kind, "IRQ_RELEASE_KEY": key}
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, env=env, start_new_session=True)
    except OSError as exc:
        return ProgramRun(argv, None, error=f"could not start {argv[0]}: {exc}")
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        out = b""
        with contextlib.suppress(TimeoutError):
            out, _ = await asyncio.wait_for(proc.communicate(), 5)
        return ProgramRun(argv, None, _tail(out),
                          error=f"{argv[0]} did not finish within {timeout_s:g}s; killed")
    return ProgramRun(argv, proc.returncode, _tail(out))


def _tail(out: bytes | None) -> list[str]:
    text = (out or b"")[-MAX_OUTPUT_BYTES:].decode("utf-8", errors="replace")
    return [line[:500] for line in text.splitlines()[-OUTPUT_LINES:]]
