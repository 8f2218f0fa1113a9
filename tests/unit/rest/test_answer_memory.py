"""The REST answer memory on a real listener: a large answer that a client does not take
holds its bytes until the guard aborts that client; meanwhile another large answer that
does not fit gets 503 Busy (small ones pass), and afterwards one fits again."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from aiohttp import web
from integration.http_serving import serving

from raftlog.observability.http_settings import HttpSettings
from raftlog.rest.answer_memory import COUNTED_FROM, READ_RESERVE, AnswerMemory
from raftlog.rest.app import errors_as_json
from raftlog.rest.pages import largest
from raftlog.topics.reads import READ_BUDGET

BIG = 16 * 1024 * 1024
LIMITS = HttpSettings(max_connections=8, max_connections_per_address=8,
                      header_timeout_ms=5000, idle_timeout_ms=5000, send_timeout_ms=800)


@pytest.fixture
def served() -> Iterator[tuple[AnswerMemory, int]]:
    memory = AnswerMemory(BIG + BIG // 2)

    async def big(_request: web.Request) -> web.Response:
        return web.Response(body=b"z" * BIG)

    async def small(_request: web.Request) -> web.Response:
        return web.Response(body=b"s" * (COUNTED_FROM - 1))

    app = web.Application(middlewares=[errors_as_json, memory.middleware()])
    app.router.add_get("/big", big)
    app.router.add_get("/small", small)
    with serving(app, LIMITS) as (_listener, port):
        yield memory, port


def _ask(port: int, path: str, *, reading: bool = True) -> socket.socket:
    sock = socket.socket()
    if not reading:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    return sock


def _read_all(sock: socket.socket) -> bytes:
    sock.settimeout(10)
    data = bytearray()
    while chunk := sock.recv(1 << 20):
        data += chunk
    return bytes(data)


def _wait(predicate: object, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not predicate() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.02)
    assert predicate()  # type: ignore[operator]


def test_a_large_answer_not_taken_holds_the_memory_until_its_client_is_aborted(
    served: tuple[AnswerMemory, int],
) -> None:
    memory, port = served
    stuck = _ask(port, "/big", reading=False)
    try:
        _wait(lambda: memory.held == BIG)
        with _ask(port, "/big") as second:
            answer = _read_all(second)
        assert answer.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in answer
        assert b'"Busy"' in answer and memory.refused == 1
        with _ask(port, "/small") as small:  # below COUNTED_FROM: never counted nor refused
            assert _read_all(small).startswith(b"HTTP/1.1 200")
        _wait(lambda: memory.held == 0, within=5.0)  # the guard aborted the stuck client
    finally:
        stuck.close()
    with _ask(port, "/big") as again:
        answer = _read_all(again)
    assert answer.startswith(b"HTTP/1.1 200") and len(answer) > BIG
    assert memory.held == 0 and memory.refused == 1


def test_a_poll_reserves_what_one_topic_read_may_return_in_base64() -> None:
    assert largest(READ_BUDGET, "base64") + 2 <= READ_RESERVE  # a full read fits one answer
