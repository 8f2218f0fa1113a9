"""The REST body memory on a real listener: a large body is held from before its first byte
is read until its handler returns; another that does not fit waits unread, then gets 503
Busy; small bodies pass regardless; a chunked body holds the most it may reach while it is
read, then its size; and a body that timed out leaves no bytes behind in its error."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest
from aiohttp import web
from integration.cluster import wait_for
from integration.http_serving import serving

from raftlog.observability.http_settings import HttpSettings
from raftlog.rest.app import errors_as_json
from raftlog.rest.bodies import read_body
from raftlog.rest.body_memory import BODY_MEMORY, SMALL_BODY_BYTES, BodyMemory
from raftlog.web.errors import RestError

LIMIT = 1024 * 1024
LARGE = 256 * 1024
LIMITS = HttpSettings(max_connections=8, max_connections_per_address=8,
                      header_timeout_ms=5000, idle_timeout_ms=5000, body_timeout_ms=800)


class Served:
    """A listener whose ``/read`` handler reads the body, then waits for ``release``."""

    def __init__(self) -> None:
        self.memory = BodyMemory(LARGE + LARGE // 2)
        self.held_in_handler: list[int] = []
        self.leftovers: list[list[bytes]] = []
        self.release = threading.Event()

    async def read(self, request: web.Request) -> web.Response:
        try:
            body = await read_body(request, LIMIT)
        except RestError as exc:  # what the error's traceback keeps of read_body's frame
            tb = exc.__traceback__
            while tb is not None:
                if tb.tb_frame.f_code.co_name == "read_body":
                    self.leftovers.append(tb.tb_frame.f_locals.get("chunks"))
                tb = tb.tb_next
            raise
        self.held_in_handler.append(self.memory.held)
        if len(body) > SMALL_BODY_BYTES:
            await asyncio.get_running_loop().run_in_executor(None, self.release.wait, 10)
        return web.Response(text=str(len(body)))


@pytest.fixture
def served() -> Iterator[tuple[Served, int]]:
    state = Served()
    app = web.Application(middlewares=[errors_as_json, state.memory.middleware()])
    app[BODY_MEMORY] = state.memory
    app.router.add_post("/read", state.read)
    with serving(app, LIMITS) as (_listener, port):
        yield state, port
    state.release.set()


def _post(port: int, body: bytes, *, chunked: bool = False, send: bool = True) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    length = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {len(body)}"
    sock.sendall(f"POST /read HTTP/1.1\r\nHost: x\r\n{length}\r\n\r\n".encode())
    if send:
        sock.sendall(f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n" if chunked
                     else body)
    return sock


def _answer(sock: socket.socket) -> bytes:
    sock.settimeout(10)
    data = bytearray()
    while b"\r\n\r\n" not in data or not data.split(b"\r\n\r\n", 1)[1]:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return bytes(data)


def test_a_large_body_holds_its_size_and_one_that_does_not_fit_waits_then_busy(
    served: tuple[Served, int],
) -> None:
    state, port = served
    with _post(port, b"a" * LARGE) as first:
        wait_for("the first body read", lambda: state.held_in_handler == [LARGE])  # held
        with _post(port, b"b" * LARGE) as second:  # does not fit: unread, then 503
            with _post(port, b"c" * SMALL_BODY_BYTES) as small:  # never counted
                assert _answer(small).endswith(str(SMALL_BODY_BYTES).encode())
            answer = _answer(second)
        assert answer.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in answer
        assert b'"Busy"' in answer and state.memory.refused == 1
        assert state.memory.waited == 1 and state.memory.held == LARGE
        state.release.set()
        assert _answer(first).endswith(str(LARGE).encode())
    wait_for("the bytes given back", lambda: state.memory.held == 0)  # handler returned
    with _post(port, b"d" * LARGE) as again:
        assert _answer(again).endswith(str(LARGE).encode())
    assert state.memory.held == 0


def test_a_chunked_body_holds_the_most_it_may_reach_then_its_size(
    served: tuple[Served, int],
) -> None:
    state, port = served
    state.release.set()
    with _post(port, b"e" * (SMALL_BODY_BYTES + 1), chunked=True) as sock:
        assert _answer(sock).endswith(str(SMALL_BODY_BYTES + 1).encode())
    assert state.held_in_handler == [SMALL_BODY_BYTES + 1]  # LIMIT while read, then shrunk
    assert state.memory.held == 0


def test_a_body_that_timed_out_leaves_no_bytes_in_its_error(
    served: tuple[Served, int],
) -> None:
    state, port = served
    with _post(port, b"f" * LARGE, send=False) as sock:
        sock.sendall(b"f" * (LARGE - 1))  # one byte short: 408 after the body time-out
        assert _answer(sock).startswith(b"HTTP/1.1 408")
    assert state.leftovers == [[]]  # the chunks are gone, not kept by the traceback
    wait_for("the bytes given back", lambda: state.memory.held == 0)
