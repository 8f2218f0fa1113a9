"""A raw ZMTP 3.0 client (NULL mechanism) for flood tests: it can do what libzmq never does.

libzmq sends nothing of a multipart message until its last frame is queued, so a libzmq
client cannot hold a peer's receive side open mid-message. A hostile client need not use
libzmq: this one speaks the wire protocol (ZeroMQ RFC 23) over a plain TCP socket and
streams the frames of one endless message, as an attacker would.
"""

from __future__ import annotations

import socket
import struct
from typing import Final

GREETING: Final = (
    b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\x00") + b"\x00"
    + b"\x00" * 31
)
MORE: Final = 0x01
LONG: Final = 0x02
COMMAND: Final = 0x04


def _frame(flags: int, body: bytes) -> bytes:
    if len(body) > 255:
        return bytes((flags | LONG,)) + struct.pack(">Q", len(body)) + body
    return bytes((flags, len(body))) + body


def _ready(socket_type: bytes) -> bytes:
    name = b"Socket-Type"
    body = b"\x05READY" + bytes((len(name),)) + name + struct.pack(">I", len(socket_type))
    return _frame(COMMAND, body + socket_type)


class RawDealer:
    """A DEALER-speaking TCP connection that sends frames one by one (``socket_type``
    another socket type's READY: a ``b"SUB"`` is a subscriber as a PUB sees it), from
    ``source`` if given."""

    def __init__(self, url: str, timeout: float = 5.0, *, socket_type: bytes = b"DEALER",
                 source: str | None = None) -> None:
        host, port = url.removeprefix("tcp://").rsplit(":", 1)
        self.sock = socket.create_connection(
            (host, int(port)), timeout=timeout,
            source_address=None if source is None else (source, 0))
        self.sock.sendall(GREETING)
        got = b""
        while len(got) < 64:
            chunk = self.sock.recv(64 - len(got))
            if not chunk:
                raise ConnectionError("the peer closed during the greeting")
            got += chunk
        self.sock.sendall(_ready(socket_type))

    def send_frame(self, body: bytes, *, more: bool = True) -> None:
        """One frame of the current message (``more``: the message goes on)."""
        self.sock.sendall(_frame(MORE if more else 0, body))

    def close(self) -> None:
        self.sock.close()


__all__ = ["RawDealer"]
