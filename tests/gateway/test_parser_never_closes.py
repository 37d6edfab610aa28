"""Bad input never closes a connection: each frame gets a ``malformed`` error frame and the
next ping on the same connection is answered, on / and on /agent."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.asyncio.client import connect

from console.gateway.protocol import decode_json, dumps

BAD_FRAMES = {
    "5000-digit integer": '{"type": "ping", "id": "x", "n": ' + "7" * 5000 + "}",
    "5000-digit seq": '{"type": "heartbeat", "backend": "dbos", "native_id": "w", "seq": '
    + "9" * 5000 + "}",
    "deep nesting": '{"type": "ping", "n": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "nesting past the cap": '{"type": "ping", "n": ' + "[" * 100 + "]" * 100 + "}",
    "NaN": '{"type": "ping", "n": NaN}',
    "Infinity": '{"type": "ping", "n": Infinity}',
    "-Infinity": '{"type": "ping", "n": -Infinity}',
    "overflowing float": '{"type": "ping", "n": 1e999}',
}


async def _open(url: str, token: str):
    ws = await connect(url, additional_headers={"Authorization": f"Bearer {token}"},
                       max_size=None)
    await ws.send(json.dumps({"type": "hello", "protocol": 1, "subscribe": False}))
    return ws


async def _next_of(ws, kind: str) -> dict:
    while True:
        reply = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if reply.get("type") == kind:
            return reply


@pytest.mark.parametrize("channel", ["/", "/agent"])
async def test_bad_frames_get_malformed_and_the_connection_answers_the_next_ping(
        trust_gateway, channel):
    token = trust_gateway.tokens["operator" if channel == "/" else "agent-a"]
    ws = await _open(trust_gateway.url + channel.rstrip("/"), token)
    try:
        if channel == "/":
            await _next_of(ws, "snapshot")
        for name, raw in BAD_FRAMES.items():
            await ws.send(raw)
            reply = await _next_of(ws, "error")
            assert reply["code"] == "malformed", (name, reply)
            await ws.send(json.dumps({"type": "ping", "id": name}))
            assert await _next_of(ws, "pong") == {"type": "pong", "id": name}
    finally:
        await ws.close()


def test_the_gateway_encodes_strict_json_even_if_a_backend_hands_it_nan():
    text = dumps({"type": "snapshot", "runs": [{"progress": float("nan"),
                                                "x": [float("inf"), 1.5]}]})
    assert decode_json(text) == {"type": "snapshot", "runs": [{"progress": None,
                                                               "x": [None, 1.5]}]}


async def test_a_snapshot_with_a_non_finite_value_from_a_backend_is_strict_json(trust_gateway):
    from console.model import Run

    run = Run(id="dbos:local/nan", backend="dbos", context="local", native_id="nan",
              progress=float("nan"), heartbeat_interval_s=float("inf"))
    trust_gateway.gateway.hub.observe_runs([run])
    ws = await _open(trust_gateway.url, trust_gateway.tokens["viewer"])
    try:
        await _next_of(ws, "welcome")
        raw = await asyncio.wait_for(ws.recv(), 10)
    finally:
        await ws.close()
    snapshot = decode_json(raw)  # raises on NaN/Infinity
    (got,) = [r for r in snapshot["runs"] if r["id"] == "dbos:local/nan"]
    assert got["progress"] is None


async def test_irq_runs_json_is_strict_json_when_a_backend_reports_nan(trust_gateway):
    import os
    import sys

    from console.model import Run

    trust_gateway.gateway.hub.observe_runs([Run(
        id="dbos:local/nan", backend="dbos", context="local", native_id="nan",
        progress=float("nan"), heartbeat_timeout_s=float("inf"))])
    env = {**os.environ, "IRQ_URL": trust_gateway.url,
           "IRQ_TOKEN": trust_gateway.tokens["viewer"], "IRQ_HOME": str(trust_gateway.home)}
    env.pop("IRQ_CONTEXT", None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "console.cli.app", "runs", "-o", "json", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    (run,) = [r for r in decode_json(out) if r["id"] == "dbos:local/nan"]
    assert run["progress"] is None
