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

    [keys]            # TUI key remapping: binding id = "keys"
    pause = "p"
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_URL = "ws://127.0.0.1:7433"


def config_dir() -> Path:
    home = os.environ.get("IRQ_HOME")
    if home:
        return Path(home)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "irq"


def state_dir() -> Path:
    home = os.environ.get("IRQ_HOME")
    if home:
        return Path(home)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "irq"


def config_path() -> Path:
    return config_dir() / "config.toml"


class ConfigError(ValueError):
    pass


@dataclass
class Context:
    name: str
    url: str = DEFAULT_URL
    token: str | None = None
    read_only: bool = False
    backends: list[str] = field(default_factory=list)


@dataclass
class Config:
    current_context: str | None = None
    contexts: dict[str, Context] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    path: Path | None = None

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


def load_config(path: Path | None = None) -> Config:
    path = path or config_path()
    if not path.exists():
        return Config(path=path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    contexts: dict[str, Context] = {}
    for name, raw in (data.get("contexts") or {}).items():
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: [contexts.{name}] must be a table")
        contexts[name] = Context(
            name=name,
            url=str(raw.get("url", DEFAULT_URL)),
            token=raw.get("token"),
            read_only=bool(raw.get("read_only", False)),
            backends=[str(b) for b in raw.get("backends", [])],
        )
    keys = {str(k): str(v) for k, v in (data.get("keys") or {}).items()}
    return Config(
        current_context=data.get("current_context"), contexts=contexts, keys=keys, path=path
    )


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def save_config(config: Config, path: Path | None = None) -> Path:
    """Write the config file (0600: it holds tokens)."""
    path = path or config.path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    if config.current_context:
        lines.append(f"current_context = {_toml_value(config.current_context)}")
    for name, ctx in sorted(config.contexts.items()):
        lines += ["", f'[contexts."{name}"]', f"url = {_toml_value(ctx.url)}"]
        if ctx.token:
            lines.append(f"token = {_toml_value(ctx.token)}")
        lines.append(f"read_only = {_toml_value(ctx.read_only)}")
        if ctx.backends:
            lines.append(f"backends = {_toml_value(ctx.backends)}")
    if config.keys:
        lines += ["", "[keys]"]
        lines += [f'"{k}" = {_toml_value(v)}' for k, v in sorted(config.keys.items())]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.chmod(0o600)
    tmp.replace(path)
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
