"""Nothing a gateway writes under IRQ_HOME is readable by other users, whatever the umask:
tokens (and their lock), the journal (database, -wal, -shm, .lock)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from console.client import GatewayClient
from console.gateway.auth import create_token
from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings
from console.model import Role


@pytest.fixture
def permissive_umask():
    old = os.umask(0)  # the worst case: every file would be created 0666
    try:
        yield
    finally:
        os.umask(old)


async def test_no_file_under_irq_home_is_readable_by_others(tmp_path: Path, monkeypatch,
                                                            permissive_umask):
    monkeypatch.setenv("IRQ_HOME", str(tmp_path))
    token = create_token(Role.VIEWER, "v", tmp_path)
    create_token(Role.AGENT, "a", tmp_path, scopes=["dbos:local"])
    gw = Gateway(GatewaySettings(port=0, home=tmp_path))
    await gw.start()
    try:
        async with GatewayClient(f"ws://127.0.0.1:{gw.port}", token) as client:
            await client.command("cancel", ["dbos:local/x"], reason="writes the journal")
        files = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.rglob("*")
                 if p.is_file()}
    finally:
        await gw.stop()
    assert {"tokens.json", "tokens.json.lock", "gateway.db", "gateway.db-wal", "gateway.db-shm",
            "gateway.db.lock"} <= set(files), files
    exposed = {name: oct(mode) for name, mode in files.items() if mode & 0o077}
    assert not exposed


def test_an_old_world_readable_journal_is_tightened(tmp_path: Path):
    from console.gateway.journal import Journal

    db = tmp_path / "gateway.db"
    db.touch(mode=0o644)
    os.chmod(db, 0o644)
    Journal(db).close()
    assert stat.S_IMODE(db.stat().st_mode) == 0o600


def test_a_child_process_log_is_created_private(tmp_path: Path, permissive_umask):
    import sys

    from console.processes import ChildProcess

    child = ChildProcess(name="gateway-like", argv=[sys.executable, "-c", "print('hi')"],
                         log=tmp_path / "logs" / "gateway.log")
    child.start()
    child.stop()
    assert stat.S_IMODE((tmp_path / "logs" / "gateway.log").stat().st_mode) == 0o600
