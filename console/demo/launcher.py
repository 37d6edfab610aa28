"""``irq demo``: a local gateway and a fleet of real DBOS agents, then the TUI.

Everything lives under ``state_dir()/demo`` (``$IRQ_HOME/demo`` when IRQ_HOME is set):
the fleet's SQLite system database, the subprocess logs, the demo tokens and a lock that
keeps two demos from sharing one fleet database. The launcher

1. creates an operator token (for you) and an agent token (for the fleet), reusing them on
   later runs while they are still valid;
2. writes a ``demo`` context (url, token, backends) into the config file and makes it current
   unless another context is current;
3. starts the gateway (``python -m console.cli.app serve``) on port 7433, or a free port when
   that one is busy, with the demo policy (``--policy console/demo/policy.toml``), and waits
   until it answers;
4. starts the fleet (``python -m console.demo.dbos.fleet --db PATH --guarded --showcase``)
   with ``IRQ_AGENT_URL`` and ``IRQ_AGENT_TOKEN`` so its agents heartbeat to the gateway,
   receive its policy and call their tools through the policy guard; the showcase adds a
   month-end close that fails until someone retries it, a stuck agent beside a slow one and
   a purchase approval waiting in its own ``DBOS.recv`` (console/demo/dbos/showcase.py);
5. opens the TUI (or, with ``--no-tui`` or when the TUI is not available, prints how to use
   the CLI and waits for SIGINT/SIGTERM);
6. on exit stops every child it started by its pid (SIGTERM, then SIGKILL after a grace
   period).

Extra fleets on other backends plug in through :data:`EXTENSIONS`: a module that exposes
``demo_extension(env: DemoEnvironment) -> DemoExtension | None``. The launcher imports it
only when its requirement (e.g. ``temporalio``) is importable and the module exists, adds the
extension's backend URLs to the gateway and starts its processes alongside the fleet.

Layout: this module and :mod:`console.demo.catalogue` (what the demo agents do, hold and ask;
shared by every backend) are shared; each backend's demo agents and fleet live in a folder of
their own (``console/demo/dbos/``, ``console/demo/temporal/``). The demo sits above the CLI's
building blocks but is reached from the CLI only through ``irq demo``, which imports
:func:`run_demo` inside the command; the demo never imports the CLI or the TUI: it starts them
as child processes (``python -m console.cli.app serve|tui``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import importlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any

from console.config import Context, config_path, load_config, save_config, state_dir
from console.processes import HOST, ChildProcess, free_port, stop_together

DEMO_CONTEXT = "demo"
DEFAULT_PORT = 7433
READY_TIMEOUT_S = 60.0
STOP_GRACE_S = 10.0
DEMO_STALLED_AFTER = "60s"  # the showcase agent stuck at 33% is alerted on after a minute
#: what the demo's agent token may report for: the DBOS fleet's runs (context ``local``, the
#: default of its backend URL) and the Restate handlers' (``restate:local``) push heartbeats;
#: the Temporal worker's heartbeats are native, but its policy guard reports decisions and
#: obligations (``temporal:local``)
DEMO_AGENT_SCOPES = ("dbos:local", "restate:local", "temporal:local")
#: the context of the demo's backends as its agents name it (IRQ_AGENT_CONTEXT)
DEMO_AGENT_CONTEXT = "local"
#: the policy the demo's gateway runs on (its cases: policy_cases.toml next to it)
DEMO_POLICY = Path(__file__).resolve().with_name("policy.toml")

#: (name, module that must be importable, module exposing ``demo_extension``)
EXTENSIONS: list[tuple[str, str, str]] = [
    ("temporal", "temporalio", "console.demo.temporal.fleet"),
    ("langgraph", "langgraph_api", "console.demo.langgraph.fleet"),
    ("restate", "restate", "console.demo.restate.fleet"),
]

#: printed when the demo runs without the TUI: how to talk to it from the command line
CLI_TOUR = """\
Use the command line:
  irq runs                       runs with state, heartbeat age, resources
  irq inbox                      interrupts waiting for a decision
  irq show RUN                   one run: resources, journal, heartbeats, audit
  irq approve INTERRUPT          (also: edit --args JSON, reject --feedback, respond --text)
  irq pause RUN --dry-run        the plan: which resources are kept, which released
  irq pause RUN --reason TEXT    then: irq resume RUN
  irq watch                      live events as JSON lines
  irq audit                      who did what, why, and what happened
  irq policy show                the policy the demo runs on (console/demo/policy.toml)
  irq policy explain --tool export_report --args '{"dataset":"monthly_summary"}' \\
      --agent analytics-agent --team research --data monthly_summary
                                 why a PHI export waits for approval (rules, conflict, winner)
  irq obligations                obligations the agents' tool calls opened (CISO notices)
  irq token create --role admin  approving a drop_table needs an admin; a prod deploy needs
                                 two operators (irq token create --role operator --name NAME)
Every listing takes -o json or -o jsonl; run `irq COMMAND --help` for details."""


def say(message: str) -> None:
    """A line on stderr; silently dropped when the terminal is gone (SIGHUP)."""
    with contextlib.suppress(OSError, ValueError):
        print(message, file=sys.stderr, flush=True)


# -------------------------------------------------------------------------------- paths


@dataclass(frozen=True)
class DemoPaths:
    root: Path

    @property
    def db(self) -> Path:
        return self.root / "fleet.db"

    @property
    def tokens(self) -> Path:
        return self.root / "demo-tokens.json"

    @property
    def lock(self) -> Path:
        return self.root / "demo.lock"

    def log(self, name: str) -> Path:
        return self.root / f"{name}.log"


def demo_paths() -> DemoPaths:
    return DemoPaths(state_dir() / "demo")


def dbos_backend_url(db: Path) -> str:
    """``dbos+sqlite:///`` + absolute path (SQLAlchemy's ``sqlite:////abs/path`` form)."""
    return f"dbos+sqlite:///{db.resolve()}"


# -------------------------------------------------------------------------------- ports


def port_is_free(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


# ------------------------------------------------------------------------------- tokens


@dataclass(frozen=True)
class DemoTokens:
    operator: str
    agent: str


def ensure_tokens(paths: DemoPaths) -> DemoTokens:
    """The demo's operator and agent tokens: reused while the token store accepts them."""
    from console.gateway.auth import TokenStore, create_token, tokens_path
    from console.model import Role

    store = TokenStore(tokens_path())
    saved: dict[str, Any] = {}
    with contextlib.suppress(OSError, json.JSONDecodeError):
        loaded = json.loads(paths.tokens.read_text())
        saved = loaded if isinstance(loaded, dict) else {}

    def valid(token: object, role: Role, scopes: tuple[str, ...] | None = None) -> bool:
        if not isinstance(token, str):
            return False
        principal = store.authenticate(token)
        if principal is None or principal.role is not role:
            return False
        # an agent token from before scopes (unscoped) is replaced by a scoped one
        return scopes is None or tuple(str(s) for s in principal.scopes or ()) == scopes

    operator = saved.get("operator")
    if not valid(operator, Role.OPERATOR):
        operator = create_token(Role.OPERATOR, "demo-operator")
    agent = saved.get("agent")
    if not valid(agent, Role.AGENT, DEMO_AGENT_SCOPES):
        agent = create_token(Role.AGENT, "demo-agent", scopes=DEMO_AGENT_SCOPES)
    assert isinstance(operator, str) and isinstance(agent, str)
    if saved.get("operator") != operator or saved.get("agent") != agent:
        tmp = paths.tokens.with_suffix(".tmp")
        tmp.write_text(json.dumps({"operator": operator, "agent": agent}))
        tmp.chmod(0o600)
        tmp.replace(paths.tokens)
    return DemoTokens(operator=operator, agent=agent)


# ------------------------------------------------------------------------------ context


def write_demo_context(url: str, token: str, backends: list[str]) -> tuple[bool, str | None]:
    """Write the ``demo`` context; make it current unless another one is.

    Returns (demo is current, the other current context or None)."""
    config = load_config()
    ctx = config.contexts.get(DEMO_CONTEXT) or Context(name=DEMO_CONTEXT)
    ctx.url, ctx.token, ctx.backends, ctx.read_only = url, token, list(backends), False
    from console.demo.preemption import preempt_command  # irq drill preempts demo workers

    ctx.preempt_command = preempt_command(demo_paths().root)
    config.contexts[DEMO_CONTEXT] = ctx
    other = config.current_context if config.current_context not in (None, DEMO_CONTEXT) else None
    if other is None:
        config.current_context = DEMO_CONTEXT
    save_config(config)
    return other is None, other


# --------------------------------------------------------------------------- extensions


@dataclass(frozen=True)
class DemoEnvironment:
    """What an extension gets to build its part of the demo."""

    demo_dir: Path
    gateway_url: str
    agent_url: str
    agent_token: str
    python: str = sys.executable
    #: the policy the gateway runs on (None: none; agents then ask as they did before policies)
    policy: Path | None = None


@dataclass
class DemoExtension:
    """More backends and processes for the demo (e.g. Temporal server + workers)."""

    name: str
    backends: list[str] = field(default_factory=list)
    #: started before the gateway (servers the gateway's adapters connect to)
    servers: list[ChildProcess] = field(default_factory=list)
    #: started after the gateway answers (agents that heartbeat to it)
    agents: list[ChildProcess] = field(default_factory=list)


def load_extensions(env: DemoEnvironment) -> list[DemoExtension]:
    out: list[DemoExtension] = []
    for name, requirement, module_name in EXTENSIONS:
        if not _importable(requirement) or not _importable(module_name):
            continue
        try:
            module = importlib.import_module(module_name)
            hook = getattr(module, "demo_extension", None)
            extension = hook(env) if callable(hook) else None
        except Exception as exc:  # noqa: BLE001 - an extension must not break the demo
            say(f"irq demo: skipping the {name} part of the demo: {type(exc).__name__}: {exc}")
            continue
        if isinstance(extension, DemoExtension):
            out.append(extension)
    return out


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


# ------------------------------------------------------------------------------ waiting


def gateway_answers(url: str, token: str) -> str | None:
    """None when the gateway accepts ``token`` and sends its state; else why not."""
    from console.client import GatewayClient, GatewayError, Unauthorized

    async def probe() -> None:
        client = GatewayClient(
            url, token, client="irq-demo", subscribe=False, open_timeout=2, request_timeout=10
        )
        await client.connect()
        await client.close()

    try:
        asyncio.run(probe())
    except Unauthorized as exc:
        return f"unauthorized: {exc.message}"
    except GatewayError as exc:
        return exc.message
    return None


def wait_until(
    check: Callable[[], str | None], process: ChildProcess, timeout_s: float
) -> str | None:
    """Poll ``check`` until it returns None; the last reason when the time runs out or
    the process dies."""
    deadline = time.monotonic() + timeout_s
    reason: str | None = "not started"
    while time.monotonic() < deadline:
        code = process.exit_code()
        if code is not None:
            return f"{process.name} exited with code {code}"
        reason = check()
        if reason is None:
            return None
        if reason.startswith("unauthorized"):
            return reason
        time.sleep(0.25)
    return f"{process.name} not ready after {timeout_s:g}s: {reason}"


# --------------------------------------------------------------------------------- main


class DemoStopped(Exception):
    """SIGTERM, SIGINT or SIGHUP arrived."""


class _Lock:
    """An exclusive lock on the demo dir: one demo per fleet database."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file: IO[str] | None = None

    def acquire(self) -> str | None:
        """None when acquired; else who holds it."""
        self.file = open(self.path, "a+")  # noqa: SIM115 - held for the demo's lifetime
        try:
            fcntl.flock(self.file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.file.seek(0)
            holder = self.file.read().strip() or "unknown"
            self.file.close()
            self.file = None
            return holder
        self.file.seek(0)
        self.file.truncate()
        self.file.write(str(os.getpid()))
        self.file.flush()
        return None

    def release(self) -> None:
        if self.file is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self.file.fileno(), fcntl.LOCK_UN)
            self.file.close()
            self.file = None


def run_demo(*, port: int = DEFAULT_PORT, tui: bool = True, mouse: bool = False) -> int:
    """Run the demo until the TUI exits or SIGINT/SIGTERM arrives; the exit code."""
    if not _importable("dbos"):
        say(
            "irq demo: the demo fleet runs on DBOS, which is not installed: "
            "pip install 'irq[dbos]' (or run `make demo`)"
        )
        return 1
    paths = demo_paths()
    # the demo and its children (gateway, fleet, Temporal) create owner-only files: the
    # databases hold workflow inputs and reasons (SECURITY.md)
    os.umask(0o077)
    paths.root.mkdir(parents=True, exist_ok=True)
    lock = _Lock(paths.lock)
    holder = lock.acquire()
    if holder is not None:
        say(
            f"irq demo: a demo is already running (pid {holder}) on {paths.root}; "
            "use it with `irq --context demo runs`, or stop it first"
        )
        return 1

    children: list[ChildProcess] = []
    servers: list[ChildProcess] = []  # of the extensions: stopped after everything else
    previous = _install_stop_handlers()
    try:
        return _run(paths, port, tui, mouse, children, servers)
    except (DemoStopped, KeyboardInterrupt):
        return 0
    finally:
        _restore_handlers(previous)
        # ignore further ^C while we clean up: the children must not be orphaned
        previous = _ignore_stop_signals()
        try:
            if children:
                say(
                    "irq demo: stopping "
                    + ", ".join(f"{c.name} (pid {c.pid})" for c in reversed(children) if c.pid)
                )
            # the agents and the gateway together, then the servers they used together: the
            # shutdowns of each wave overlap (one by one, they added up to 5.5 s)
            others = [c for c in children if not any(c is s for s in servers)]
            for wave in (others, servers):
                for child in stop_together(list(reversed(wave)), STOP_GRACE_S):
                    say(f"  {child.name} (pid {child.pid}) did not stop in {STOP_GRACE_S:g}s: "
                        "SIGKILL")
        finally:
            _restore_handlers(previous)
            lock.release()


def _run(
    paths: DemoPaths,
    port: int,
    tui: bool,
    mouse: bool,
    children: list[ChildProcess],
    servers: list[ChildProcess],
) -> int:
    tokens = ensure_tokens(paths)
    if not port_is_free(port):
        chosen = free_port()
        say(f"irq demo: port {port} is busy; using {chosen}")
        port = chosen
    url = f"ws://{HOST}:{port}"
    env = DemoEnvironment(
        demo_dir=paths.root,
        gateway_url=url,
        agent_url=f"{url}/agent",
        agent_token=tokens.agent,
        policy=DEMO_POLICY,
    )
    extensions = load_extensions(env)
    backends = [dbos_backend_url(paths.db)]
    for extension in extensions:
        backends += extension.backends

    current, other = write_demo_context(url, tokens.operator, backends)
    if not current:
        say(
            f"irq demo: context {other!r} stays current; talk to the demo with "
            f"`irq --context {DEMO_CONTEXT} ...` or IRQ_CONTEXT={DEMO_CONTEXT}"
        )
    for var in ("IRQ_URL", "IRQ_TOKEN", "IRQ_CONTEXT"):
        if os.environ.get(var) and os.environ.get(var) != DEMO_CONTEXT:
            say(
                f"irq demo: note: {var} is set in your environment and overrides the demo "
                "context for the CLI"
            )

    # the extensions' servers do not need one another: start them all, then wait for each
    # (their start-ups overlap; one after the other they took 5.3 s of the demo's 8.4 s)
    for extension in extensions:
        for server in extension.servers:
            _start(server, children)
            servers.append(server)
    for server in servers:
        if server.ready is not None:
            problem = wait_until(_readiness(server.ready), server, READY_TIMEOUT_S)
            if problem:
                return _died(server, problem)

    gateway = ChildProcess(
        name="gateway",
        argv=[sys.executable, "-m", "console.cli.app", "serve", "--host", HOST, "--port", str(port)]
        + ["--policy", str(DEMO_POLICY)]
        # the showcase's stuck agent is alerted on within a minute, not the default ten
        + ["--stalled-after", DEMO_STALLED_AFTER]
        + [a for b in backends for a in ("--backend", b)],
        log=paths.log("gateway"),
    )
    _start(gateway, children)
    problem = wait_until(lambda: gateway_answers(url, tokens.operator), gateway, READY_TIMEOUT_S)
    if problem:
        return _died(gateway, problem)

    # the context names the demo's runs (``dbos:local/...``) in the obligations agents open
    agent_env = {
        "IRQ_AGENT_URL": env.agent_url,
        "IRQ_AGENT_TOKEN": tokens.agent,
        "IRQ_AGENT_CONTEXT": DEMO_AGENT_CONTEXT,
    }
    fleet: ChildProcess | None = None
    if _importable("console.demo.dbos.fleet"):
        fleet = ChildProcess(
            name="fleet",
            argv=[sys.executable, "-m", "console.demo.dbos.fleet", "--db", str(paths.db)]
            + ["--guarded", "--showcase"],
            log=paths.log("fleet"),
            env=agent_env,
        )
        _start(fleet, children)
    else:
        say(
            "irq demo: the demo fleet (console.demo.dbos.fleet) is not available; "
            "the gateway runs without agents"
        )
    for extension in extensions:
        for agent in extension.agents:
            agent.env = {**agent_env, **agent.env}
            _start(agent, children)

    _announce(url, paths, children, current, extensions, tui=tui)
    if tui and sys.stdin.isatty() and sys.stdout.isatty():
        code = _run_tui(url, tokens.operator, mouse, gateway, children)
        if code is not None:
            return code
    elif tui:
        say("irq demo: no terminal for the TUI; running like --no-tui")
    return _wait(children, gateway)


def _run_tui(
    url: str, token: str, mouse: bool, gateway: ChildProcess, children: list[ChildProcess]
) -> int | None:
    """Run ``irq tui`` on this terminal in a child process until the operator quits (and
    meanwhile answer ``irq drill``'s requests to preempt the workers the launcher started).

    A child process, not an in-process call: whatever happens to it (a crash, a signal) its
    sockets close with it and the launcher stays in control of the cleanup, restoring the
    terminal if the TUI could not. None when the TUI is not available (then: CLI mode)."""
    if not _importable("console.tui.app"):
        say("irq demo: the terminal UI is not available yet; use the CLI:\n" + CLI_TOUR)
        return None
    from console.demo.preemption import control_dir, serve_launcher_requests  # irq drill

    saved = _terminal_state()
    argv = [sys.executable, "-m", "console.cli.app", "tui"] + (["--mouse"] if mouse else [])
    env = {**os.environ, "IRQ_URL": url, "IRQ_TOKEN": token, "IRQ_CONTEXT": DEMO_CONTEXT}
    # same terminal and process group: the TUI is the foreground job's reader
    tui = subprocess.Popen(argv, env=env)
    try:
        while True:
            try:
                code = tui.wait(0.5)
                break
            except subprocess.TimeoutExpired:
                pass
            serve_launcher_requests(control_dir(demo_paths().root), children)
            if gateway.exit_code() is not None:
                _stop_tui(tui)
                _restore_terminal(saved)
                return _died(gateway, f"the gateway exited with code {gateway.exit_code()}")
    finally:
        if tui.poll() is None:
            _stop_tui(tui)
        if tui.returncode != 0:
            _restore_terminal(saved)
    if code != 0:
        say(f"irq demo: the terminal UI exited with code {code}")
        return 1
    return 0


def _stop_tui(tui: subprocess.Popen[bytes]) -> None:
    tui.terminate()
    try:
        tui.wait(3)
    except subprocess.TimeoutExpired:
        tui.kill()
        tui.wait(3)


def _terminal_state() -> list[Any] | None:
    import termios

    try:
        return termios.tcgetattr(sys.stdin.fileno())
    except (termios.error, OSError, ValueError):
        return None


#: leave the alternate screen, show the cursor, stop mouse reporting and bracketed paste
_TERMINAL_RESET = "\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l\x1b[?25h\x1b[?1049l"


def _restore_terminal(saved: list[Any] | None) -> None:
    """Undo what a TUI that died without cleaning up left behind."""
    import termios

    with contextlib.suppress(termios.error, OSError, ValueError):
        if saved is not None:
            termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)
        sys.stdout.write(_TERMINAL_RESET)
        sys.stdout.flush()


def _readiness(ready: Callable[[], bool]) -> Callable[[], str | None]:
    """A ``wait_until`` check from a child's ``ready`` predicate."""
    return lambda: None if ready() else "not ready"


def _start(process: ChildProcess, children: list[ChildProcess]) -> None:
    children.append(process)
    process.start()


def _died(process: ChildProcess, problem: str) -> int:
    say(f"irq demo: {problem}")
    tail = process.log_tail()
    if tail:
        say(f"--- last lines of {process.log}:\n{tail}\n---")
    return 1


def _announce(
    url: str,
    paths: DemoPaths,
    children: list[ChildProcess],
    current: bool,
    extensions: list[DemoExtension],
    *,
    tui: bool,
) -> None:
    lines = ["", "irq demo is up"]
    for child in children:
        where = f"  {url}" if child.name == "gateway" else ""
        lines.append(f"  {child.name:<9}pid {child.pid}{where}  log {child.log}")
    lines.append(
        f"  {'context':<9}{DEMO_CONTEXT}{' (current)' if current else ''} in {config_path()}"
    )
    lines.append(f"  {'database':<9}{paths.db}")
    for extension in extensions:
        lines.append(f"  {'extra':<9}{extension.name}: " + ", ".join(extension.backends))
    if tui and sys.stdin.isatty() and sys.stdout.isatty():
        lines += ["", "Opening the terminal UI; quitting it stops the demo.", ""]
    else:
        lines += ["", CLI_TOUR, "", "Stop the demo with Ctrl-C.", ""]
    say("\n".join(lines))


def _wait(children: list[ChildProcess], gateway: ChildProcess) -> int:
    """Until SIGINT/SIGTERM (DemoStopped); 1 when the gateway dies on its own."""
    from console.demo.preemption import control_dir, serve_launcher_requests  # irq drill

    reported: set[str] = set()
    while True:
        time.sleep(0.5)
        serve_launcher_requests(control_dir(demo_paths().root), children)
        for child in children:
            code = child.exit_code()
            if code is None or child.name in reported:
                continue
            reported.add(child.name)
            if child is gateway:
                return _died(child, f"the gateway exited with code {code}")
            say(f"irq demo: {child.name} exited with code {code}; see {child.log}")


# ------------------------------------------------------------------------------ signals

#: SIGHUP too: a closed terminal or a dropped SSH session must not orphan the children
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    raise DemoStopped(signal.Signals(signum).name)


def _install_stop_handlers() -> dict[signal.Signals, _Handler]:
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous: dict[signal.Signals, _Handler] = {}
    for sig in STOP_SIGNALS:
        previous[sig] = signal.signal(sig, _raise_stopped)
    return previous


def _ignore_stop_signals() -> dict[signal.Signals, _Handler]:
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous: dict[signal.Signals, _Handler] = {}
    for sig in STOP_SIGNALS:
        previous[sig] = signal.signal(sig, signal.SIG_IGN)
    return previous


def _restore_handlers(previous: dict[signal.Signals, _Handler]) -> None:
    for sig, handler in previous.items():
        if handler is not None:
            signal.signal(sig, handler)

