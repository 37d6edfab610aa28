"""The typed socket: what the gateway uses of a websockets connection, and nothing more.

websockets' ``ServerConnection`` satisfies these Protocols structurally (mypy checks it
where ``serve`` is given the gateway's handlers), so every use of a connection in the
gateway is checked, and a test may pass any object with these methods. Importing this
module does not import websockets.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from websockets.http11 import Response

#: what one message is: text (``str``) or binary (``bytes``)
Message = str | bytes
#: what may be sent: a message, or a message in fragments (a large snapshot, also as it is
#: built)
Sendable = str | bytes | Iterable[bytes | memoryview] | AsyncIterable[bytes]


class HandshakeRequest(Protocol):
    """The HTTP request that opened a connection."""

    @property
    def path(self) -> str: ...

    @property
    def headers(self) -> Mapping[str, str]: ...


class HandshakeConnection(Protocol):
    """A connection during its opening handshake (``process_request``)."""

    @property
    def remote_address(self) -> Any: ...  # (host, port) for IP; the family decides the form

    def respond(self, status: HTTPStatus, text: str) -> Response: ...


class GatewaySocket(Protocol):
    """An open connection on ``/`` or ``/agent``."""

    @property
    def request(self) -> HandshakeRequest | None: ...  # None only before the handshake

    @property
    def remote_address(self) -> Any: ...

    async def send(self, message: Sendable, *, text: bool | None = None) -> None: ...

    async def recv(self) -> Message: ...

    async def close(self, code: int = 1000, reason: str = "") -> None: ...

    def __aiter__(self) -> AsyncIterator[Message]: ...
