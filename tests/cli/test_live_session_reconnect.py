"""The client's own reconnect loop (``LiveSession``, behind the TUI and ``irq watch``) against a
real ``irq serve``: a dropped connection (a TCP proxy in between is cut) and a gateway restart
(the process stopped and started again on the same port).

After a drop the session resumes from its last sequence number (the events it missed are
replayed, no new snapshot); after a restart the gateway has a new epoch and the session loads a
fresh snapshot. Its status goes live -> reconnecting -> live either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from cli_harness import ServedGateway, start_gateway

from console.client import ConnectionStatus, FleetView, GatewayClient, LiveSession
from console.processes import stop_process


class CuttableProxy:
    """A loopback TCP proxy in front of the gateway whose link can be cut (every connection
    reset, nothing listening) and restored on the same port: a network drop."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    async def listen(self) -> None:
        self._server = await asyncio.start_server(self._link, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._links):
            writer.transport.abort()  # a reset, not a polite close
        self._links.clear()
        await self._server.wait_closed()

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._links |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


class Recorder:
    def __init__(self) -> None:
        self.statuses: list[ConnectionStatus] = []
        self.batches: list[list[dict[str, Any]]] = []

    def on_status(self, status: ConnectionStatus) -> None:
        self.statuses.append(status)

    def on_update(self, view: FleetView, batch: list[dict[str, Any]]) -> None:
        self.batches.append(batch)

    @property
    def state(self) -> str:
        return self.statuses[-1].state if self.statuses else ""

    def states(self) -> list[str]:
        """The status sequence with repeats collapsed."""
        out: list[str] = []
        for status in self.statuses:
            if not out or out[-1] != status.state:
                out.append(status.state)
        return out


async def until(predicate: Callable[[], object], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def audit_event(gateway: ServedGateway, reason: str) -> None:
    """Make the gateway publish an event: a command (on a run it does not know) is audited."""
    async with GatewayClient(gateway.url, gateway.admin, subscribe=False) as client:
        await client.command("pause", ["dbos:local/no-such-run"], reason=reason)


def audited(session: LiveSession, reason: str) -> bool:
    return any(entry.reason == reason for entry in session.view.audit)


async def test_live_session_resumes_from_its_last_seq_after_a_dropped_connection(
    served_gateway: ServedGateway,
) -> None:
    proxy = CuttableProxy(served_gateway.port)
    await proxy.listen()
    seen = Recorder()
    session = LiveSession(proxy.url, served_gateway.operator, on_update=seen.on_update,
                          on_status=seen.on_status, max_backoff=0.5)
    task = asyncio.create_task(session.run())
    try:
        await until(lambda: seen.state == "live", "the session to go live")
        await audit_event(served_gateway, "before the drop")
        await until(lambda: audited(session, "before the drop"), "the first event")
        epoch, seq = session.view.epoch, session.view.seq

        await proxy.cut()
        await until(lambda: seen.state == "reconnecting" and seen.statuses[-1].attempts >= 2,
                    "failed reconnect attempts while the link is down")
        await audit_event(served_gateway, "while disconnected")  # missed by the session
        assert not audited(session, "while disconnected")
        seen.batches.clear()
        await proxy.listen()  # the link is back, same port

        await until(lambda: audited(session, "while disconnected"), "the missed event")
        await until(lambda: seen.state == "live", "live again")
        assert seen.states()[-3:] == ["live", "reconnecting", "live"], seen.states()
        # resumed: the same gateway life, the missed event replayed, no new snapshot
        assert session.view.epoch == epoch and session.view.seq > seq
        kinds = [event["kind"] for batch in seen.batches for event in batch]
        assert "snapshot" not in kinds and "audit" in kinds, kinds
        assert audited(session, "before the drop")  # nothing lost across the drop
    finally:
        session.stop()
        await asyncio.wait_for(task, 10)
        with contextlib.suppress(AssertionError):
            await proxy.cut()


async def test_live_session_reconnects_to_a_restarted_gateway_with_a_fresh_snapshot(
    served_gateway: ServedGateway,
) -> None:
    seen = Recorder()
    session = LiveSession(served_gateway.url, served_gateway.operator, on_update=seen.on_update,
                          on_status=seen.on_status, max_backoff=0.5)
    task = asyncio.create_task(session.run())
    restarted: ServedGateway | None = None
    try:
        await until(lambda: seen.state == "live", "the session to go live")
        old_epoch = session.view.epoch
        await audit_event(served_gateway, "first life")
        await until(lambda: audited(session, "first life"), "an event of the first life")

        await asyncio.to_thread(stop_process, served_gateway.process)  # SIGTERM, by its pid
        await until(lambda: seen.state == "reconnecting", "reconnecting once the gateway is gone")
        seen.batches.clear()
        # the same gateway (home, journal, tokens) started again on the same port
        restarted = await asyncio.to_thread(
            start_gateway, served_gateway.home, None, served_gateway.port
        )
        await until(lambda: seen.state == "live" and session.view.epoch != old_epoch,
                    "live on the restarted gateway")
        assert seen.states()[-3:] == ["live", "reconnecting", "live"], seen.states()
        assert any(s.attempts >= 1 for s in seen.statuses if s.state == "reconnecting")
        # a new gateway life: a fresh snapshot, not a replay from the old sequence
        kinds = [event["kind"] for batch in seen.batches for event in batch]
        assert kinds[:1] == ["snapshot"], kinds
        # and it keeps following the new gateway
        await audit_event(restarted, "second life")
        await until(lambda: audited(session, "second life"), "an event of the second life")
    finally:
        session.stop()
        await asyncio.wait_for(task, 10)
        if restarted is not None:
            stop_process(restarted.process)
