"""``irq ctx list`` marks the current context (text and json, never a token); ``irq ctx use``
changes only the file's current_context (comments and other keys stay), writes it 0600, and
the next command connects through the chosen context."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from cli_harness import ServedGateway, irq

from console.cli.contexts import set_current_context
from console.config import load_config

CONFIG = """# team gateways
current_context = "staging"

[contexts.staging]
url = "ws://127.0.0.1:9"  # nothing listens here
read_only = true

[contexts.prod]
url = "{url}"
token = "{token}"
backends = ["dbos+sqlite:///tmp/x.db"]

[keys]
pause = "p"
"""


def _config(home: Path, url: str = "ws://127.0.0.1:1", token: str = "irq_secret") -> Path:
    path = home / "config.toml"
    path.write_text(CONFIG.format(url=url, token=token))
    return path


def test_list_marks_the_current_context_and_hides_tokens(irq_home: Path):
    _config(irq_home)
    as_json = irq("ctx", "list", "-o", "json")
    assert as_json.code == 0, as_json.stderr
    listed = {c["name"]: c for c in json.loads(as_json.stdout)}
    assert listed["staging"]["current"] is True and listed["prod"]["current"] is False
    assert listed["staging"]["read_only"] is True and listed["prod"]["has_token"] is True
    assert listed["prod"]["backends"] == ["dbos+sqlite:///tmp/x.db"]
    text = irq("ctx", "list")
    assert "irq_secret" not in text.stdout + as_json.stdout
    (staging,) = [line for line in text.stdout.splitlines() if "staging" in line]
    assert staging.lstrip().startswith("*")
    (prod,) = [line for line in text.stdout.splitlines() if "prod" in line]
    assert not prod.lstrip().startswith("*")


def test_use_rewrites_only_current_context(irq_home: Path):
    path = _config(irq_home)
    before = path.read_text()
    used = irq("ctx", "use", "prod", "-o", "json")
    assert used.code == 0, used.stderr
    assert json.loads(used.stdout) == {"current_context": "prod", "previous": "staging",
                                       "path": str(path)}
    after = path.read_text()
    assert after == before.replace('current_context = "staging"', 'current_context = "prod"')
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_config().current_context == "prod"
    listed = {c["name"]: c["current"] for c in json.loads(irq("ctx", "list", "-o", "json").stdout)}
    assert listed == {"prod": True, "staging": False}


def test_use_of_an_unknown_context_exits_3_and_writes_nothing(irq_home: Path):
    path = _config(irq_home)
    before = path.read_text()
    result = irq("ctx", "use", "qa")
    assert result.code == 3
    assert "unknown context 'qa'" in result.stderr and "prod, staging" in result.stderr
    assert path.read_text() == before


def test_current_context_is_added_before_the_first_table():
    text = "# mine\n[contexts.a]\nurl = \"ws://h:1\"\n"
    assert set_current_context(text, "a") == 'current_context = "a"\n\n' + text
    nested = '[contexts.a]\nurl = "ws://h:1"\n'
    assert set_current_context(nested, 'we"ird').startswith('current_context = "we\\"ird"\n')


def test_the_next_command_uses_the_chosen_context(irq_home: Path,
                                                  served_gateway: ServedGateway):
    _config(irq_home, served_gateway.url, served_gateway.viewer)
    refused = irq("runs", "-o", "json")  # staging: nothing listens there
    assert refused.code == 6
    assert irq("ctx", "use", "prod").code == 0
    listed = irq("runs", "-o", "json")
    assert listed.code == 0, listed.stderr
    assert json.loads(listed.stdout) == []
