"""What a closed connection means to the client: a refused token is not worth retrying."""

from __future__ import annotations

from websockets.exceptions import ConnectionClosedError
from websockets.frames import Close

from console.client import GatewayUnreachable, Unauthorized, closed_error


def _closed(code: int, reason: str) -> ConnectionClosedError:
    return ConnectionClosedError(Close(code, reason), Close(code, reason), True)


def test_a_token_refused_after_the_handshake_is_unauthorized() -> None:
    # the gateway's close when a token is revoked between the handshake and the session
    err = closed_error(_closed(1008, "token revoked or expired"))
    assert isinstance(err, Unauthorized)
    assert "revoked" in err.message


def test_a_late_hello_and_other_closes_are_worth_retrying() -> None:
    assert isinstance(closed_error(_closed(1008, "no hello")), GatewayUnreachable)
    assert isinstance(closed_error(_closed(1011, "internal error")), GatewayUnreachable)
    assert isinstance(closed_error(ConnectionClosedError(None, None)), GatewayUnreachable)
