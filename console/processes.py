"""Local child processes: a free loopback port to start one on, the program to run
(:func:`executable`), :class:`ChildProcess` (a named child with its log file, stopped by its
pid; :func:`stop_together` stops several at once), waiting for one to be ready
(:func:`wait_until`), stopping a bare ``Popen`` by its pid, and whether a pid is still alive.

Used by the demo launcher (``console/demo/``), the live fleet of the TUI tests and screenshots
(``devtools/live_fleet.py``), the Temporal dev server wrapper and the test fixtures. A
child is always stopped by its own pid (its own process group), never by name.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

HOST = "127.0.0.1"

T = TypeVar("T")


PICK_FLOOR = 20000
"""The lowest port :func:`free_port` hands out; below it sit well-known services' ports."""


def ephemeral_ports() -> tuple[int, int]:
    """The range the kernel takes client ports from (Linux reads it from /proc; 32768-60999
    is Linux's default, other systems use a range above it)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[:2]
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


@dataclass
class _PortCursor:
    """Where this process looks for its next port: a random start, then onward in turn, so
    one process never hands out the same port twice in a row of thousands."""

    pid: int = -1
    next: int = 0


_cursor = _PortCursor()


def free_port(host: str = HOST) -> int:
    """A TCP port nobody listens on right now, picked below the kernel's ephemeral range.

    A port the kernel picks for port 0 comes from the range every outgoing connection takes
    its client port from: on a busy machine (a test suite, a fleet of clients) one of them
    can take the port between the pick and the server's bind. Below that range only another
    picker can, and each process walks on from its own random start. Falls back to the
    kernel's pick when the range below is too small to walk.
    """
    low, _high = ephemeral_ports()
    span = low - PICK_FLOOR
    if span < 1000:
        return _kernel_pick(host)
    if _cursor.pid != os.getpid():
        _cursor.pid, _cursor.next = os.getpid(), random.SystemRandom().randrange(span)
    for _ in range(min(span, 500)):
        port = PICK_FLOOR + _cursor.next % span
        _cursor.next += 1
        if _bindable(host, port):
            return port
    return _kernel_pick(host)


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def _kernel_pick(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def distinct_free_ports(count: int, host: str = HOST) -> tuple[int, ...]:
    """``count`` different free ports, in ascending order."""
    ports: set[int] = set()
    while len(ports) < count:
        ports.add(free_port(host))
    return tuple(sorted(ports))


PORT_TAKEN_SAYINGS = ("address already in use", "address in use", "the port is in use")


class PortTaken(RuntimeError):
    """A server exited because another process had bound one of its ports.

    A free port is free only when it was picked: another server picking its own ports, or a
    parallel test, can bind it before the child does. A first start can move to fresh ports
    (:func:`port_taken` reads the child's last words); a restart cannot, clients hold them.
    """


def port_taken(message: str) -> bool:
    """Does a server's exit message say a port was in use (Go and Python: "address already in
    use", Rust: "Address in use (os error 98)", irq serve: "the port is in use")?"""
    text = message.lower()
    return any(said in text for said in PORT_TAKEN_SAYINGS)


def exit_error(message: str) -> RuntimeError:
    """The error for a child that exited saying ``message``: :class:`PortTaken` when it says
    a port was in use (a first start may move to fresh ports), else a RuntimeError."""
    return (PortTaken if port_taken(message) else RuntimeError)(message)


def start_on_fresh_ports(
    start_once: Callable[[], T], repick: Callable[[], None], *, fixed: bool, tries: int = 3
) -> T:
    """What ``start_once()`` returns; when it raises :class:`PortTaken` and the ports are not
    ``fixed`` (chosen by the caller, or held by clients since a first start), ``repick()``
    fresh ones and try again, up to ``tries`` starts in all."""
    for attempt in range(tries):
        try:
            return start_once()
        except PortTaken:
            if fixed or attempt == tries - 1:
                raise
            repick()
    raise ValueError(f"tries must be at least 1, not {tries}")


def stop_process(proc: subprocess.Popen[Any], grace_s: float = 10.0) -> None:
    """SIGTERM ``proc`` by its pid, and SIGKILL it if it is still there after ``grace_s``.

    A SIGCONT goes first, in case a test froze it with SIGSTOP: a stopped process would
    never act on the SIGTERM.
    """
    if proc.poll() is not None:
        return
    try:
        os.kill(proc.pid, signal.SIGCONT)
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(grace_s)
    except ProcessLookupError:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(grace_s)


def pid_alive(pid: int) -> bool:
    """Is ``pid`` a live process? A zombie (dead, not yet reaped) is not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:  # gone meanwhile, or no /proc: kill(0) answered
        return not Path("/proc").is_dir()


def executable(name: str, *, missing: str) -> str:
    """The program ``name`` next to this Python (an extra installed it into the venv), else on
    PATH; FileNotFoundError(``missing``) when it is in neither."""
    beside = Path(sys.executable).with_name(name)
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(missing)
    return found


def wait_until(
    ready: Callable[[], bool],
    *,
    timeout_s: float,
    interval_s: float,
    failed: Callable[[], str | None],
) -> bool:
    """Poll until ``ready()`` (True) or ``timeout_s`` passed (False). ``failed()`` is asked
    first on every round; the message it returns (e.g. "the server exited: ...") is raised as
    RuntimeError at once, so a child that died is not waited for: as :class:`PortTaken` when
    it says a port was in use."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        problem = failed()
        if problem is not None:
            raise exit_error(problem)
        if ready():
            return True
        time.sleep(interval_s)
    return False


@dataclass
class ChildProcess:
    """One child process with its log file (stdout and stderr, appended; None: this
    process's own), in its own process group: the terminal's ^C does not reach it, and
    :meth:`stop` signals the whole group, so whatever it started goes with it. On Linux it also
    gets SIGTERM when the thread that started it dies, even by SIGKILL, so a killed ``irq demo``
    or test run leaves no gateway or fleet behind."""

    name: str
    argv: list[str]
    log: Path | None
    env: dict[str, str] = field(default_factory=dict)
    #: polled after start until true (e.g. by the demo launcher); None: started is ready
    ready: Callable[[], bool] | None = None
    #: working directory of the child (None: this process's)
    cwd: Path | None = None
    #: what :meth:`terminate` sends, in this order (SIGINT for a server whose app took SIGTERM
    #: for itself; both when each of them ends a different part of the child)
    stop_signals: tuple[signal.Signals, ...] = (signal.SIGTERM,)
    popen: subprocess.Popen[bytes] | None = None
    _log_file: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def start(self) -> None:
        if self.log is not None:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            # 0600 from creation: logs carry run names, reasons and errors (SECURITY.md)
            fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._log_file = open(fd, "ab")  # noqa: SIM115 - closed in stop()
            header = f"\n--- {time.strftime('%F %T')} {' '.join(self.argv)}\n"
            self._log_file.write(header.encode())
            self._log_file.flush()
        self.popen = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT if self._log_file else None,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
            cwd=self.cwd,
            start_new_session=True,  # own process group: the terminal's ^C does not reach it
            preexec_fn=_die_with_parent,
        )

    def exit_code(self) -> int | None:
        """None while it runs (or before it started); its exit code once it has exited."""
        return None if self.popen is None else self.popen.poll()

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def terminate(self) -> None:
        """Send its process group ``stop_signals`` (SIGTERM) without waiting (to stop several
        at once: :func:`stop_together`)."""
        popen = self.popen
        if popen is not None and popen.poll() is None:
            _signal_group(popen.pid, signal.SIGCONT)  # a frozen child cannot act on TERM
            for sig in self.stop_signals:
                _signal_group(popen.pid, sig)

    def kill(self) -> None:
        """SIGKILL the child itself, at once: no cleanup (a crashed host, an eviction)."""
        popen = self.popen
        if popen is not None and popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(popen.pid, signal.SIGKILL)
            popen.wait(10)

    def stop(self, grace_s: float = 10.0) -> bool:
        """Send its process group ``stop_signals``, wait ``grace_s``, then SIGKILL what is
        left of the group.

        False when it had to be killed (it did not stop within ``grace_s``)."""
        self.terminate()
        return self._reap(time.monotonic() + grace_s)

    def _reap(self, deadline: float) -> bool:
        """After :meth:`terminate`: wait for it until ``deadline`` (monotonic), then SIGKILL
        what is left of its group and close its log; False when it had to be killed."""
        stopped = True
        popen = self.popen
        if popen is not None:
            try:
                popen.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                stopped = False
            _signal_group(popen.pid, signal.SIGKILL)  # leftovers of its group, if any
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(5)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return stopped

    def log_tail(self, lines: int = 15) -> str:
        if self.log is None:
            return ""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.rstrip().splitlines()[-lines:])


def stop_together(children: list[ChildProcess], grace_s: float = 10.0) -> list[ChildProcess]:
    """Stop several children at once: signal each (in the given order), then wait for all of
    them within one ``grace_s``, so their shutdowns overlap instead of adding up; SIGKILL
    what is left. The children that had to be killed."""
    for child in children:
        child.terminate()
    deadline = time.monotonic() + grace_s
    return [child for child in children if not child._reap(deadline)]


def _signal_group(pid: int, sig: signal.Signals) -> None:
    """Signal the process group our child leads (created with start_new_session)."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _die_with_parent() -> None:
    """In the child before exec (Linux): SIGTERM it when its parent dies, even by SIGKILL."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
