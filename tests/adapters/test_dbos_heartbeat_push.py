"""The agent-side heartbeat pusher against a real websockets server on loopback."""

from __future__ import annotations

import json
import socket
import threading
import time

from websockets.exceptions import ConnectionClosed
from websockets.sync.server import ServerConnection, serve

from backend_adapters.heartbeat_push import HeartbeatPusher, heartbeat_frame
from console.processes import free_port


class Gateway:
    """A stand-in agent channel: records frames, optionally answers each with an error."""

    def __init__(self, port: int = 0, *, reply_error: bool = False) -> None:
        self.messages: list[dict] = []
        self.headers: list[str | None] = []
        self.reply_error = reply_error

        def handler(ws: ServerConnection) -> None:
            self.headers.append(ws.request.headers.get("Authorization"))
            try:
                for raw in ws:
                    frame = json.loads(raw)
                    self.messages.append(frame)
                    if self.reply_error and frame["type"] == "heartbeat":
                        ws.send(json.dumps({"type": "error", "code": "bad", "message": "nope"}))
            except ConnectionClosed:
                pass

        self.server = serve(handler, "127.0.0.1", port)
        self.port = self.server.socket.getsockname()[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/agent"

    def beats(self) -> list[dict]:
        return [m for m in self.messages if m["type"] == "heartbeat"]

    def close(self) -> None:
        self.server.shutdown()
        self.thread.join(5)


def wait(predicate, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.02)


def beat(native_id: str, seq: int, phase: str = "running") -> dict:
    return heartbeat_frame(
        native_id=native_id,
        seq=seq,
        phase=phase,
        context="local",
        progress=0.5,
        resources=[{"id": "gpu", "kind": "gpu", "on_pause": "keep", "on_cancel": "release",
                    "state": "held", "detail": ""}],
        interval_s=2.0,
        timeout_s=10.0,
        in_flight_step="fetch",
    )  # fmt: skip


def test_pusher_says_hello_with_bearer_token_then_sends_frames():
    gw = Gateway()
    pusher = HeartbeatPusher(gw.url, "tok-1")
    try:
        pusher.push(beat("wf-1", 1))
        wait(lambda: len(gw.beats()) == 1)
        assert gw.messages[0] == {"type": "hello", "protocol": 1, "client": "irq-agent/0.1"}
        assert gw.headers == ["Bearer tok-1"]
        frame = gw.beats()[0]
        assert frame["backend"] == "dbos" and frame["native_id"] == "wf-1"
        assert frame["in_flight_step"] == "fetch" and frame["resources"][0]["state"] == "held"
        assert frame["at"].endswith("+00:00")
    finally:
        pusher.close()
        gw.close()


def test_gateway_down_keeps_latest_frame_per_run_and_delivers_after_it_comes_up():
    # a gateway that takes the TCP connection and never answers the websocket handshake: the
    # sender thread's connect hangs for the whole open timeout (60 s here)
    silent = socket.create_server(("127.0.0.1", 0))
    silent.settimeout(30)
    port = silent.getsockname()[1]
    pusher = HeartbeatPusher(
        f"ws://127.0.0.1:{port}/agent", "t", min_backoff_s=0.05, open_timeout_s=60.0
    )
    try:
        started = time.monotonic()
        pusher.push(beat("wf-a", 1))
        handshake, _ = silent.accept()  # the sender thread is now stuck in the handshake
        for seq in range(2, 50):
            pusher.push(beat("wf-a", seq))
        pusher.push(beat("wf-b", 7, "paused"))
        # a push that waited for the handshake would take the 60 s open timeout; the bound is
        # generous for a loaded machine (how fast a push is belongs in benchmarks/)
        assert time.monotonic() - started < 20.0, "push never blocks the agent"
        assert not pusher.connected and not pusher.flush(0.2)
        handshake.close()  # the gateway went away mid-handshake; it comes back on the same port
        silent.close()
        gw = Gateway(port)
        try:
            wait(lambda: len(gw.beats()) == 2)
            by_run = {b["native_id"]: b for b in gw.beats()}
            assert by_run["wf-a"]["seq"] == 49 and by_run["wf-b"]["phase"] == "paused"
            assert pusher.dropped >= 48
            assert pusher.flush(2.0)
        finally:
            gw.close()
    finally:
        pusher.close(0.2)


def test_a_frame_built_before_a_newer_one_of_its_run_is_dropped_queued_or_sent():
    """The beat thread builds seq N; the agent's final report (N+1) is pushed first."""
    port = free_port()
    pusher = HeartbeatPusher(f"ws://127.0.0.1:{port}/agent", "t", min_backoff_s=0.05)
    try:
        stale = beat("wf-1", 10)
        final = beat("wf-1", 11, "paused")
        pusher.push(final)
        pusher.push(stale)  # while the final report is still queued
        gw = Gateway(port)
        try:
            wait(lambda: len(gw.beats()) == 1)
            assert pusher.flush(2.0)
            pusher.push(stale)  # after it was sent
            restarted = beat("wf-1", 1)  # a new execution that counts from 1 again, later
            pusher.push(restarted)
            wait(lambda: len(gw.beats()) == 2)
            assert pusher.flush(2.0)
            assert [(b["seq"], b["phase"]) for b in gw.beats()] == [(11, "paused"), (1, "running")]
            assert pusher.dropped == 2
        finally:
            gw.close()
    finally:
        pusher.close(0.2)


def test_error_frames_are_logged_and_pushing_continues():
    gw = Gateway(reply_error=True)
    pusher = HeartbeatPusher(gw.url, "t")
    try:
        pusher.push(beat("wf-1", 1))
        wait(lambda: len(gw.beats()) == 1)
        time.sleep(0.3)
        pusher.push(beat("wf-1", 2))
        wait(lambda: len(gw.beats()) == 2)
        wait(lambda: pusher.errors)
        assert pusher.errors[0]["code"] == "bad"
    finally:
        pusher.close()
        gw.close()


def test_reconnects_after_the_gateway_restarts():
    port = free_port()
    gw = Gateway(port)
    pusher = HeartbeatPusher(gw.url, "t", min_backoff_s=0.05)
    try:
        pusher.push(beat("wf-1", 1))
        wait(lambda: len(gw.beats()) == 1)
        gw.close()
        for seq in range(2, 6):  # the first sends after the restart may hit the dead socket
            pusher.push(beat("wf-1", seq))
            time.sleep(0.05)
        gw = Gateway(port)
        pusher.push(beat("wf-1", 9))
        wait(lambda: any(b["seq"] == 9 for b in gw.beats()))
        assert sum(1 for m in gw.messages if m["type"] == "hello") == 1
    finally:
        pusher.close(0.5)
        gw.close()


def test_unset_url_never_raises_into_the_agent(monkeypatch):
    monkeypatch.delenv("IRQ_AGENT_URL", raising=False)
    pusher = HeartbeatPusher(min_backoff_s=0.05)
    pusher.push(beat("wf-1", 1))
    pusher.push({"type": "heartbeat", "native_id": object()})  # even garbage is swallowed
    assert not pusher.flush(0.2) and not pusher.connected
    pusher.close(0.1)
