"""Where irq keeps its config and state, and the contexts in the config file.

Precedence: command-line flag > environment variable > config file > default.

- ``IRQ_HOME`` set: config is ``$IRQ_HOME/config.toml``, state lives in ``$IRQ_HOME``.
- otherwise ``$XDG_CONFIG_HOME/irq/config.toml`` (``~/.config``) and
  ``$XDG_STATE_HOME/irq/`` (``~/.local/state``).

Config file::

    current_context = "demo"

    [contexts.demo]
    url = "ws://127.0.0.1:7433"
    token = "irq_..."
    read_only = false
    backends = ["dbos+sqlite:///var/lib/agents/sys.db"]
    # irq drill: how to preempt one run's agent (no shell; {run_id} {native_id} {backend}
    # {context} are filled in and the line is split with shlex)
    preempt_command = "kubectl delete pod -l run={native_id}"
    retention = "30d"           # irq serve: decided approvals, settled obligations kept so long
    held_too_long_after = "1h"  # a paused run keeping a resource past this raises held_too_long
    # irq serve in this context: alerts (docs/operator-guide.md "Alerts")
    interrupt_deadline = "8s"   # interrupts without a deadline of their own get this one
    stalled_after = "10m"       # fresh beats, progress unmoved this long: stalled
    retrying_after = 3          # a step failing this many times in a row: retrying

    [resources.gpu]   # irq release RUN RESOURCE --force: argv + RUN_ID RESOURCE_ID, no shell
    release_command = ["/usr/local/bin/free-gpu", "--now"]

    [prices]          # work at risk and cost held: per hour per unit, by resource kind
    gpu = 2.50
    currency = "USD"

    [keys]            # TUI key remapping: binding id = "keys"
    pause = "p"
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from console.durations import parse_duration
from console.notify_config import NotifySettings
from console.prices import PriceTable, price_table_of
from console.resource_kinds import ResourceKindFile

DEFAULT_URL = "ws://127.0.0.1:7433"


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) with the directory itself 0700 -- it holds
    tokens, the journal and logs. An existing directory is left as it is: it may be one the
    user chose on purpose (and chmod-ing a shared directory would be worse)."""
    if not path.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
            os.chmod(path, 0o700)  # mkdir's mode passes through the umask: say it exactly
    return path


def write_private_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, readable by the owner only (0600) from the
    first byte: the temporary file is created 0600 by ``os.open`` in the same directory and
    then renamed over ``path``, so there is no moment at which it is world-readable."""
    ensure_private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)  # the umask may have taken bits away: set exactly 0600
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            fd = -1
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def config_dir() -> Path:
    home = os.environ.get("IRQ_HOME")
    if home:
        return Path(home)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "irq"


def state_dir() -> Path:
    """Where the gateway keeps tokens, journal and logs; created 0700 when it is missing
    (every caller is about to write there, and a later ``mkdir(parents=True)`` would make
    it world-readable)."""
    home = os.environ.get("IRQ_HOME")
    if home:
        path = Path(home)
    else:
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        path = Path(base) / "irq"
    with contextlib.suppress(OSError):  # a read-only place still has a path to report
        ensure_private_dir(path)
    return path


def cache_dir() -> Path:
    """Short-lived caches (shell completion): ``$IRQ_HOME/cache`` or ``$XDG_CACHE_HOME/irq``."""
    home = os.environ.get("IRQ_HOME")
    if home:
        return Path(home) / "cache"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "irq"


def config_path() -> Path:
    return config_dir() / "config.toml"


class ConfigError(ValueError):
    pass


# ------------------------------------------------------------------- the file's schema
# Strict: a TOML string is never taken for a boolean ("false" would have been True) and
# never for a list (a string of backends would have become a list of characters).


class ContextFile(BaseModel):
    """One ``[contexts.NAME]`` table."""

    model_config = ConfigDict(extra="forbid", strict=True)

    url: str = DEFAULT_URL
    token: str | None = None
    read_only: bool = False
    backends: list[str] = []
    preempt_command: str | None = None
    retention: str | None = None  # irq serve: settled journal rows kept this long ("30d")
    held_too_long_after: str | None = None  # a paused run keeping a resource past this alerts
    #: ``irq serve`` in this context: a deadline for interrupts that carry none ("8s", "24h")
    interrupt_deadline: str | None = None
    stalled_after: str | None = None  # fresh beats, progress unmoved this long ("10m")
    retrying_after: int | None = None  # attempts before a retrying step is an alert

    @field_validator("retention", "held_too_long_after", "interrupt_deadline", "stalled_after")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration(value)
        return value

    @field_validator("url")
    @classmethod
    def _websocket_url(cls, value: str) -> str:
        if not value.startswith(("ws://", "wss://")):
            raise ValueError(f"must be a ws:// or wss:// URL, not {value!r}")
        return value

    @field_validator("preempt_command")
    @classmethod
    def _preempt_template(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from console.preempt_template import check_preempt_template

        check_preempt_template(value)
        return value


class ConfigFile(BaseModel):
    """The whole ``config.toml``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    current_context: str | None = None
    contexts: dict[str, ContextFile] = {}
    keys: dict[str, str] = {}
    notify: NotifySettings = NotifySettings()  # [notify]: TUI bell/desktop (console/notify_config)
    resources: dict[str, ResourceKindFile] = {}  # [resources.KIND]: release_command
    prices: dict[str, Any] = {}  # [prices]: KIND = per hour, currency (console/prices.py)

    @field_validator("prices")
    @classmethod
    def _prices(cls, value: dict[str, Any]) -> dict[str, Any]:
        price_table_of(value)  # raises with the key that is wrong
        return value


_TABLE_KEYS: dict[str, tuple[str, ...]] = {
    "": tuple(ConfigFile.model_fields),
    "contexts.*": tuple(ContextFile.model_fields),
    "notify": tuple(NotifySettings.model_fields),
    "resources.*": tuple(ResourceKindFile.model_fields),
}


def _describe(value: Any) -> str:
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return f"{type(value).__name__} {value!r}"


def _problem(error: Any) -> str:
    """One validation error as a sentence that names the key the way the file spells it."""
    loc = [str(part) for part in error["loc"]]
    key = ".".join(loc)
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        table = ("contexts.*" if loc[0] == "contexts" and len(loc) == 3
                 else "resources.*" if loc[0] == "resources" and len(loc) == 3
                 else "notify" if loc[0] == "notify" and len(loc) == 2 else "")
        where = f"[{'.'.join(loc[:-1])}]" if len(loc) > 1 else "the top level"
        known = ", ".join(_TABLE_KEYS.get(table, ()))
        return f"unknown key {loc[-1]!r} in {where}" + (f" (known keys: {known})" if known else "")
    if kind == "bool_type":
        return f"{key} must be true or false (unquoted), not {_describe(value)}"
    if kind == "list_type":
        example = f"{loc[-1]} = [{value!r}]".replace("'", '"') if isinstance(value, str) else ""
        hint = f"; write {example}" if example else ""
        return f"{key} must be an array of strings, not {_describe(value)}{hint}"
    if kind == "string_type":
        return f"{key} must be a string, not {_describe(value)}"
    if kind in ("dict_type", "model_type"):
        return f"{key} must be a table ([{key}]), not {_describe(value)}"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{key} {message}" if kind == "value_error" else f"{key}: {message}"


@dataclass
class Context:
    name: str
    url: str = DEFAULT_URL
    token: str | None = None
    read_only: bool = False
    backends: list[str] = field(default_factory=list)
    preempt_command: str | None = None
    retention: str | None = None
    held_too_long_after: str | None = None
    interrupt_deadline: str | None = None
    stalled_after: str | None = None
    retrying_after: int | None = None


@dataclass
class Config:
    current_context: str | None = None
    contexts: dict[str, Context] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    path: Path | None = None
    notify: NotifySettings = field(default_factory=NotifySettings)
    resources: dict[str, ResourceKindFile] = field(default_factory=dict)
    prices: PriceTable = field(default_factory=PriceTable)

    def context(self, name: str | None = None) -> Context:
        """The named context, else the current one, else an unnamed default."""
        chosen = name or self.current_context
        if chosen is None:
            return Context(name="default")
        if chosen not in self.contexts:
            if name is None:
                return Context(name=chosen)
            known = ", ".join(sorted(self.contexts)) or "none configured"
            raise ConfigError(f"unknown context {chosen!r} (known: {known})")
        return self.contexts[chosen]


def parse_config(text: str, path: Path) -> Config:
    """Parse and validate the text of a config file; every problem names ``path`` and the
    key (all of them at once, so one edit fixes the file)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    try:
        parsed = ConfigFile.model_validate(data)
    except ValidationError as exc:
        problems = [_problem(e) for e in exc.errors()]
        if len(problems) == 1:
            raise ConfigError(f"{path}: {problems[0]}") from None
        raise ConfigError(f"{path}:\n" + "\n".join(f"  - {p}" for p in problems)) from None
    contexts = {
        name: Context(name, c.url, c.token, c.read_only, list(c.backends), c.preempt_command,
                      c.retention, c.held_too_long_after,
                      c.interrupt_deadline, c.stalled_after, c.retrying_after)
        for name, c in parsed.contexts.items()
    }
    return Config(
        current_context=parsed.current_context,
        contexts=contexts,
        keys=dict(parsed.keys),
        path=path,
        notify=parsed.notify,
        resources=dict(parsed.resources),
        prices=price_table_of(parsed.prices),
    )


def load_config(path: Path | None = None) -> Config:
    path = path or config_path()
    if not path.exists():
        return Config(path=path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    return parse_config(text, path)


def render_config(config: Config) -> str:
    """The TOML text of ``config`` (tomli-w does the quoting and escaping)."""
    import tomli_w

    data: dict[str, Any] = {}
    if config.current_context:
        data["current_context"] = config.current_context
    contexts: dict[str, Any] = {}
    for name, ctx in sorted(config.contexts.items()):
        table: dict[str, Any] = {"url": ctx.url}
        if ctx.token:
            table["token"] = ctx.token
        table["read_only"] = ctx.read_only
        if ctx.backends:
            table["backends"] = list(ctx.backends)
        if ctx.preempt_command:
            table["preempt_command"] = ctx.preempt_command
        for key in ("retention", "held_too_long_after", "interrupt_deadline", "stalled_after",
                    "retrying_after"):
            if getattr(ctx, key) is not None:
                table[key] = getattr(ctx, key)
        contexts[name] = table
    if contexts:
        data["contexts"] = contexts
    if config.keys:
        data["keys"] = dict(sorted(config.keys.items()))
    notify = config.notify.model_dump(exclude_defaults=True)
    if notify:
        data["notify"] = notify
    if config.resources:
        data["resources"] = {k: v.model_dump(exclude_none=True)
                             for k, v in sorted(config.resources.items())}
    if config.prices:
        data["prices"] = {**config.prices.per_hour, "currency": config.prices.currency}
    return tomli_w.dumps(data)


def save_config(config: Config, path: Path | None = None) -> Path:
    """Write the config file: 0600 from its first byte (it holds tokens), atomically, in a
    directory created 0700."""
    path = path or config.path or config_path()
    write_private_file(path, render_config(config))
    return path


@dataclass
class Connection:
    """Resolved gateway connection for CLI and TUI."""

    url: str
    token: str | None
    context: str
    read_only: bool = False


def resolve_connection(
    *, url: str | None = None, token: str | None = None, context: str | None = None
) -> Connection:
    """flag > env (IRQ_URL, IRQ_TOKEN, IRQ_CONTEXT) > config file > default."""
    config = load_config()
    ctx = config.context(context or os.environ.get("IRQ_CONTEXT") or None)
    return Connection(
        url=url or os.environ.get("IRQ_URL") or ctx.url or DEFAULT_URL,
        token=token or os.environ.get("IRQ_TOKEN") or ctx.token,
        context=ctx.name,
        read_only=ctx.read_only,
    )
