"""A backend that is down makes the gateway mark it stale, not crash; it recovers when back."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from console.client import GatewayClient
from console.gateway.auth import create_token
from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings
from console.model import Role


async def _until(client: GatewayClient, predicate, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met"
        try:
            await asyncio.wait_for(client.updates(), 1)
        except TimeoutError:
            pass


async def _listing_warns(url: str, token: str, home: Path) -> None:
    """``irq runs`` asks the gateway for its listing (no snapshot) and still says which
    backend is down, on stderr, with an empty listing on stdout."""
    one_shot = GatewayClient(url, token, subscribe=False, snapshot=False)
    await one_shot.connect()
    try:
        listing = await one_shot.query("runs", states=["running"], expr="has:gpu")
        assert not one_shot.view.backends and not one_shot.view.runs  # no snapshot came
    finally:
        await one_shot.close()
    assert listing["runs"] == []
    [down] = listing["backends"]
    assert (down["backend"], down["context"], down["reachable"]) == ("dbos", "local", False)
    env = {**os.environ, "IRQ_URL": url, "IRQ_TOKEN": token, "IRQ_HOME": str(home)}
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "irq"), "runs", "-o", "json", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err
    assert out.decode().strip() == "[]"
    assert "warning: backend dbos:local is unreachable" in err.decode()
    assert "does not exist" in err.decode()


async def test_missing_dbos_database_is_stale_then_recovers_when_it_appears(tmp_path: Path):
    db = tmp_path / "later" / "sys.db"
    token = create_token(Role.VIEWER, "watcher", tmp_path)
    gw = Gateway(GatewaySettings(port=0, home=tmp_path, flush_interval_s=0.02,
                                 backends=[f"dbos+sqlite:///{db}?poll=0.2"]))
    await gw.start()
    try:
        async with GatewayClient(f"ws://127.0.0.1:{gw.port}", token) as client:
            def health():
                return client.view.backends.get("dbos:local")

            await _until(client, lambda: health() is not None and "does not exist" in health().error)
            assert health().reachable is False
            assert await client.ping() >= 0  # the gateway itself stays up
            await _listing_warns(f"ws://127.0.0.1:{gw.port}", token, tmp_path)

            db.parent.mkdir()
            code = (  # a real DBOS app launching on it creates the system database
                "from dbos import DBOS\n"
                f"DBOS(config={{'name': 'late', 'system_database_url': 'sqlite:///{db}'}})\n"
                "DBOS.launch()\nDBOS.destroy()\n"
            )
            proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code)
            assert await proc.wait() == 0
            await _until(client, lambda: health().reachable)
            assert health().error == ""
    finally:
        await gw.stop()


async def test_a_backend_added_before_start_is_read_leased_and_polled(tmp_path: Path):
    """``Gateway.add_backend`` (the benchmarks' synthetic backends): polled like a configured
    one -- here a real DBOS backend whose database does not exist yet shows as unreachable."""
    from backend_adapters.registry import open_backend, parse_backend_url

    db = tmp_path / "nowhere" / "sys.db"
    token = create_token(Role.VIEWER, "watcher", tmp_path)
    gw = Gateway(GatewaySettings(port=0, home=tmp_path, flush_interval_s=0.02))
    backend = open_backend(parse_backend_url(f"dbos+sqlite:///{db}?poll=0.2"), gw.ledger)
    gw.add_backend("dbos:local", backend)
    await gw.start()
    try:
        assert gw.leases.holds("dbos:local")
        async with GatewayClient(f"ws://127.0.0.1:{gw.port}", token) as client:
            await _until(client, lambda: "does not exist" in getattr(
                client.view.backends.get("dbos:local"), "error", ""))
    finally:
        await gw.stop()
