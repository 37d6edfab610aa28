"""The config file is validated (a clear error naming the file and the key, exit 2 from the
CLI), written by a TOML library, and written 0600 atomically in a 0700 directory."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_harness import irq

from console.config import (
    Config,
    ConfigError,
    Context,
    config_path,
    load_config,
    save_config,
    state_dir,
)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_000() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _write(home: Path, text: str) -> Path:
    path = home / "config.toml"
    path.write_text(text)
    return path


def test_a_string_of_backends_is_an_error_naming_the_file_and_key(irq_home: Path):
    path = _write(irq_home, '[contexts.lab]\nbackends = "dbos+sqlite:///agents.db"\n')
    with pytest.raises(ConfigError) as info:
        load_config()
    message = str(info.value)
    assert str(path) in message
    assert "contexts.lab.backends must be an array of strings" in message
    assert 'backends = ["dbos+sqlite:///agents.db"]' in message  # how to fix it

    result = irq("--context", "lab", "serve", "--port", "1")
    assert result.code == 2
    assert str(path) in result.stderr and "contexts.lab.backends" in result.stderr
    assert "'d', 'b'" not in result.stderr  # never a list of characters


def test_a_quoted_false_is_an_error_never_a_silent_true(irq_home: Path):
    path = _write(
        irq_home,
        'current_context = "prod"\n[contexts.prod]\nurl = "ws://127.0.0.1:1"\n'
        'read_only = "false"\n',
    )
    with pytest.raises(ConfigError) as info:
        load_config()
    assert str(path) in str(info.value)
    assert "contexts.prod.read_only must be true or false" in str(info.value)

    result = irq("runs")
    assert result.code == 2
    assert str(path) in result.stderr and "contexts.prod.read_only" in result.stderr
    approve = irq("approve", "dbos:local/wf-1#wf-1/1", "--yes")
    assert approve.code == 2  # not a read-only refusal (5), not an attempt to connect (6)


def test_unknown_keys_are_reported_with_their_table(irq_home: Path):
    _write(irq_home, '[contexts.lab]\nurl = "ws://h:1"\nreadonly = true\n[colours]\n')
    with pytest.raises(ConfigError) as info:
        load_config()
    message = str(info.value)
    assert "unknown key 'readonly' in [contexts.lab]" in message
    assert "read_only" in message  # the known keys are listed
    assert "unknown key 'colours'" in message


def test_values_that_need_escaping_survive_a_write_and_a_read(irq_home: Path):
    tricky = 'ab"c\\d\n\te\u00e9\u2603 ]"x = 1'
    config = Config(
        current_context=tricky,
        contexts={tricky: Context(tricky, "wss://h:1/" + tricky, tricky, True, [tricky, "b"])},
        keys={"pause": tricky, 'we"ird': "p"},
    )
    save_config(config)
    loaded = load_config()
    assert loaded.current_context == tricky
    assert loaded.contexts[tricky] == config.contexts[tricky]
    assert loaded.keys == config.keys


def test_the_config_file_is_written_0600_in_a_0700_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    home = tmp_path / "fresh" / "irq"  # does not exist yet
    monkeypatch.setenv("IRQ_HOME", str(home))
    save_config(Config(contexts={"p": Context("p", token="irq_secret")}))
    assert _mode(config_path()) == 0o600
    assert _mode(home) == 0o700
    # rewriting keeps it private (the old file is replaced, never reopened for writing)
    save_config(load_config())
    assert _mode(config_path()) == 0o600
    assert [p.name for p in home.iterdir()] == ["config.toml"]  # no temp file left behind


def test_under_umask_000_the_file_is_still_0600_and_the_dirs_0700(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask_000: None
):
    home = tmp_path / "open" / "irq"
    monkeypatch.setenv("IRQ_HOME", str(home))
    save_config(Config(contexts={"p": Context("p", token="irq_secret")}))
    assert _mode(config_path()) == 0o600
    assert _mode(home) == 0o700
    state = tmp_path / "state-home"
    monkeypatch.setenv("IRQ_HOME", str(state))
    assert state_dir() == state and _mode(state) == 0o700


def test_no_file_in_the_config_dir_is_ever_created_readable_by_others(
    irq_home: Path, monkeypatch: pytest.MonkeyPatch, umask_000: None
):
    """Record the mode of every file the moment it is created for writing (whatever way
    Python creates it): under umask 000 the old code's temporary file was born 0666 and
    only chmod-ed after the token was in it."""
    import builtins
    import io

    born: list[tuple[str, int]] = []
    real_os_open, real_io_open = os.open, io.open

    def os_open(path: str | Path, flags: int, mode: int = 0o777, **kw: object) -> int:
        fd = real_os_open(path, flags, mode, **kw)  # type: ignore[arg-type]
        if flags & os.O_CREAT:
            born.append((str(path), stat.S_IMODE(os.fstat(fd).st_mode)))
        return fd

    def io_open(file: object, mode: str = "r", *args: object, **kw: object) -> object:
        handle = real_io_open(file, mode, *args, **kw)  # type: ignore[call-overload]
        if isinstance(file, str | Path) and set(mode) & set("wax+"):
            born.append((str(file), stat.S_IMODE(os.fstat(handle.fileno()).st_mode)))
        return handle

    with monkeypatch.context() as patched:
        patched.setattr(os, "open", os_open)
        patched.setattr(io, "open", io_open)
        patched.setattr(builtins, "open", io_open)
        save_config(Config(contexts={"p": Context("p", token="irq_secret")}))
    created = [(name, mode) for name, mode in born if Path(name).parent == irq_home]
    assert created, "save_config created no file in the config directory"
    assert all(mode == 0o600 for _, mode in created), created
    assert _mode(config_path()) == 0o600


def test_retention_held_too_long_and_resource_release_commands_round_trip(tmp_path: Path) -> None:
    from console.config import parse_config, render_config
    from console.resource_kinds import release_commands

    text = (
        '[contexts.prod]\nurl = "ws://h:1"\nretention = "7d"\nheld_too_long_after = "2h"\n'
        '[resources.gpu]\nrelease_command = "/bin/free-gpu --now"\n'
        '[resources.lock]\nrelease_command = ["/bin/unlock"]\n'
    )
    config = parse_config(text, tmp_path / "config.toml")
    assert config.contexts["prod"].retention == "7d"
    assert config.contexts["prod"].held_too_long_after == "2h"
    assert release_commands(config.resources) == {"gpu": ["/bin/free-gpu", "--now"],
                                                  "lock": ["/bin/unlock"]}
    again = parse_config(render_config(config), tmp_path / "config.toml")
    assert again.contexts["prod"].retention == "7d"
    assert release_commands(again.resources) == release_commands(config.resources)


def test_a_retention_that_is_not_a_duration_names_the_key(tmp_path: Path) -> None:
    from console.config import ConfigError, parse_config

    with pytest.raises(ConfigError, match="retention"):
        parse_config('[contexts.p]\nretention = "forever"\n', tmp_path / "c.toml")
    with pytest.raises(ConfigError, match="known keys: release_command"):
        parse_config('[resources.gpu]\nrelease = "x"\n', tmp_path / "c.toml")
