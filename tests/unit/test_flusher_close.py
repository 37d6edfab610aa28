"""A client that closes while the gateway sends it events ends its flusher quietly: the
send's ConnectionClosed is the end of the session, not an error (it was a task exception
never retrieved, logged with a traceback at each close)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosedOK
from websockets.frames import Close

from console.gateway.beat_shedding import BeatShedding
from console.gateway.client_sessions import ClientSessions
from console.gateway.event_log import Subscriber
from console.gateway.hub import Hub
from console.gateway.refusals import RefusalLedger
from console.gateway.settings import GatewaySettings
from console.gateway.shared_frames import SharedFrames


class ClosedSocket:
    def __init__(self, error: Exception) -> None:
        self.error = error
        self.sends = 0

    async def send(self, message: Any, text: bool | None = None) -> None:
        self.sends += 1
        raise self.error


def _sessions(hub: Hub) -> ClientSessions:
    settings = GatewaySettings()
    return ClientSessions(settings, hub, SharedFrames(hub), None,  # type: ignore[arg-type]
                          RefusalLedger(lambda entry: None), Counter(),
                          BeatShedding(hub.events.marks))


@pytest.mark.parametrize("error", [ConnectionClosedOK(Close(1000, ""), Close(1000, ""), True),
                                   RuntimeError("a bug")])
async def test_a_close_mid_send_ends_the_flusher_and_a_bug_still_raises(
        error: Exception) -> None:
    hub = Hub()
    sessions = _sessions(hub)
    hub.publish("notice", {"text": "x"})
    wake = asyncio.Event()
    sub = Subscriber(wake=wake.set, cursor=0)
    wake.set()
    ws = ClosedSocket(error)
    if isinstance(error, ConnectionClosedOK):
        await asyncio.wait_for(sessions.flush(ws, sub, wake), 5)  # type: ignore[arg-type]
    else:
        with pytest.raises(RuntimeError):
            await asyncio.wait_for(sessions.flush(ws, sub, wake), 5)  # type: ignore[arg-type]
    assert ws.sends == 1
