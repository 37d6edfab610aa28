"""Malformed and unknown frames get error frames; the server stays up for everyone."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect

from console.gateway.protocol import FrameError, parse_agent_frame, parse_client_frame

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
frame_like = st.fixed_dictionaries(
    {"type": st.sampled_from(["hello", "command", "query", "focus", "ping", "heartbeat", "nope"])},
    optional={
        "id": json_values, "action": json_values, "targets": json_values, "decision": json_values,
        "what": json_values, "since": json_values, "native_id": json_values, "backend": json_values,
    },
)
raw_frames = st.one_of(
    st.text(max_size=200),
    st.binary(max_size=200),
    json_values.map(json.dumps),
    frame_like.map(json.dumps),
)


@given(raw=raw_frames)
@settings(max_examples=400, deadline=None)
def test_parsers_accept_or_raise_frame_error_never_anything_else(raw):
    for parse in (parse_client_frame, parse_agent_frame):
        try:
            parse(raw)
        except FrameError as exc:
            assert exc.code in {"malformed", "unknown_type", "invalid", "too_large"}
            assert exc.message


@pytest.mark.parametrize(
    "raw",
    [
        "[" * 100_000 + "]" * 100_000,  # a bare array, nested past the recursion limit
        '{"type":"command","id":"c","action":"decide","targets":["i"],"decision":'
        + '{"a":' * 3000 + "1" + "}" * 3000 + "}",  # a well-formed frame around the nesting
    ],
    ids=["bare", "inside-a-command"],
)
@pytest.mark.parametrize("parse", [parse_client_frame, parse_agent_frame])
def test_deeply_nested_json_is_a_frame_error(raw, parse):
    """The parser must refuse it (never accept it, never let RecursionError escape)."""
    with pytest.raises(FrameError) as caught:
        parse(raw)
    assert caught.value.code in {"malformed", "too_large"}
    assert caught.value.message


async def _send_and_expect_error(ws, raw) -> dict:
    await ws.send(raw)
    reply = json.loads(await asyncio.wait_for(ws.recv(), 5))
    return reply


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=raw_frames)
async def test_server_answers_bad_frames_with_error_frames_and_stays_up(gateway, raw):
    headers = {"Authorization": f"Bearer {gateway.tokens['operator']}"}
    async with connect(gateway.url, additional_headers=headers) as ws:
        await ws.send(json.dumps({"type": "hello", "protocol": 1, "subscribe": False}))
        assert json.loads(await ws.recv())["type"] == "welcome"
        assert json.loads(await ws.recv())["type"] == "snapshot"
        try:
            msg = parse_client_frame(raw)
        except FrameError:
            msg = None
        if msg is None:
            reply = await _send_and_expect_error(ws, raw)
            assert reply["type"] == "error"
            assert reply["code"] in {"malformed", "unknown_type", "invalid", "too_large"}
        await ws.send(json.dumps({"type": "ping", "id": "alive"}))
        for _ in range(5):
            reply = json.loads(await asyncio.wait_for(ws.recv(), 5))
            if reply.get("type") == "pong":
                break
        assert reply == {"type": "pong", "id": "alive"}


async def test_oversized_frame_gets_too_large_and_the_connection_survives(gateway):
    headers = {"Authorization": f"Bearer {gateway.tokens['operator']}"}
    async with connect(gateway.url, additional_headers=headers, max_size=None) as ws:
        await ws.send(json.dumps({"type": "hello", "protocol": 1, "subscribe": False}))
        await ws.recv(), await ws.recv()
        await ws.send(json.dumps({"type": "ping", "id": "x" * (2 << 20)}))
        reply = json.loads(await ws.recv())
        assert reply["code"] == "too_large"
        await ws.send(json.dumps({"type": "ping", "id": "ok"}))
        assert json.loads(await ws.recv()) == {"type": "pong", "id": "ok"}


async def test_frames_before_hello_get_expected_hello(gateway):
    headers = {"Authorization": f"Bearer {gateway.tokens['viewer']}"}
    async with connect(gateway.url, additional_headers=headers) as ws:
        await ws.send(json.dumps({"type": "ping", "id": "early"}))
        reply = json.loads(await ws.recv())
        assert reply["code"] == "expected_hello"
        assert reply["ref"] == "early"
        await ws.send(json.dumps({"type": "hello", "protocol": 1}))
        assert json.loads(await ws.recv())["type"] == "welcome"


async def test_heartbeat_for_an_unknown_backend_gets_an_error_frame(gateway):
    headers = {"Authorization": f"Bearer {gateway.tokens['agent']}"}
    async with connect(gateway.url + "/agent", additional_headers=headers) as ws:
        await ws.send(json.dumps({"type": "hello", "protocol": 1}))
        assert json.loads(await ws.recv())["type"] == "policy"  # after every agent hello
        await ws.send(json.dumps({"type": "heartbeat", "backend": "dbos", "native_id": "wf"}))
        reply = json.loads(await ws.recv())
        assert reply["code"] == "unknown_backend"
        await ws.send("{not json")
        assert json.loads(await ws.recv())["code"] == "malformed"
