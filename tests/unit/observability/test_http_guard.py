"""The HTTP listener's connection guard on a real socket (issue #25 finding 1): caps per
address and overall, eviction of half-open connections by new ones, the header time-out,
busy requests never reaped, and floods logged once a second with a count."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest
from aiohttp import web
from integration.http_serving import serving
from structlog.testing import capture_logs

from raftlog.observability.flood_log import FloodLog
from raftlog.observability.http import HttpListener
from raftlog.observability.http_settings import HttpSettings

LIMITS = HttpSettings(max_connections=4, max_connections_per_address=3,
                      header_timeout_ms=600, idle_timeout_ms=600, send_timeout_ms=800)
BIG = 16 * 1024 * 1024
"""The /big answer: far more than the kernel's socket buffers take, so most of it waits in
the transport until the client reads."""


@pytest.fixture
def listener() -> Iterator[tuple[HttpListener, int]]:
    async def ok(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def slow(_request: web.Request) -> web.Response:
        await asyncio.sleep(2.5)
        return web.Response(text="done")

    async def big(_request: web.Request) -> web.Response:
        return web.Response(body=b"z" * BIG)

    app = web.Application()
    app.router.add_get("/big", big)
    app.router.add_get("/ok", ok)
    app.router.add_get("/slow", slow)
    with serving(app, LIMITS) as served:
        yield served


def half_open(port: int, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))
    sock.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\n")  # headers never finished
    return sock


def get(port: int, path: str = "/ok", source: str = "127.0.0.1") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5,
                                  source_address=(source, 0)) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        try:
            while chunk := sock.recv(4096):
                data += chunk
        except ConnectionResetError:  # a refusal closes without reading the request
            return data or b"RESET"
        return data


def wait_open(running: HttpListener, count: int, within: float = 2.0) -> None:
    """Wait until the guard counts ``count`` open connections (accepts are asynchronous)."""
    deadline = time.monotonic() + within
    while running.guard.open != count and time.monotonic() < deadline:
        time.sleep(0.02)
    assert running.guard.open == count


def closed_by_peer(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        while sock.recv(4096):  # an answer (a 503) before the close also counts
            pass
        return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_one_address_gets_its_share_then_a_fast_503(listener: tuple[HttpListener, int]) -> None:
    _running, port = listener
    held = [half_open(port) for _ in range(3)]
    try:
        started = time.monotonic()
        answer = get(port)
        assert answer.startswith((b"HTTP/1.1 503", b"RESET")), answer[:80]
        assert time.monotonic() - started < 3.0  # answered, not the 5 s socket time-out
        assert get(port, source="127.0.0.2").startswith(b"HTTP/1.1 200")  # others still in
    finally:
        for sock in held:
            sock.close()


def test_a_full_listener_evicts_half_open_connections_for_a_real_request(
    listener: tuple[HttpListener, int],
) -> None:
    running, port = listener
    held = [half_open(port, f"127.0.0.{n}") for n in range(2, 6)]
    try:
        wait_open(running, 4)
        assert get(port).startswith(b"HTTP/1.1 200")  # the oldest half-open one made room
        assert closed_by_peer(held[0], 1.0)
    finally:
        for sock in held:
            sock.close()


def test_a_full_listener_evicts_from_the_most_crowded_address_first(
    listener: tuple[HttpListener, int],
) -> None:
    """The CI failure of 2026-11-26: under a half-open flood, a probe's connection was the
    oldest idle one often enough to be reset. The flood's own address goes first."""
    running, port = listener
    probe = half_open(port, "127.0.0.9")  # the oldest, from an address of its own
    flood = [half_open(port, "127.0.0.2") for _ in range(3)]
    try:
        wait_open(running, 4)
        assert get(port, source="127.0.0.3").startswith(b"HTTP/1.1 200")
        assert closed_by_peer(flood[0], 1.0)  # the crowded address's oldest made room
        assert not closed_by_peer(probe, 0.3)  # the oldest of all was kept
    finally:
        for sock in [probe, *flood]:
            sock.close()


def test_trickled_headers_are_cut_off_and_busy_requests_are_not(
    listener: tuple[HttpListener, int],
) -> None:
    running, port = listener
    trickler = half_open(port)
    slow = socket.create_connection(("127.0.0.1", port), timeout=5)
    slow.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    try:
        assert closed_by_peer(trickler, 3.0)  # header_timeout 0.6 s, reaper every second
        slow.settimeout(5)
        assert slow.recv(4096).startswith(b"HTTP/1.1 200")  # ran 2.5 s: never reaped
    finally:
        trickler.close()
        slow.close()
    wait_open(running, 0)  # every slot came back


def _ask_big(port: int, *, reading: bool) -> socket.socket:
    sock = socket.socket()
    if not reading:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    return sock


def test_a_client_that_stops_reading_is_aborted_and_a_slow_one_is_not(
    listener: tuple[HttpListener, int],
) -> None:
    """send_timeout 0.8 s: a client that takes none of a 16 MiB answer is aborted (its
    unsent answer freed); one that reads 1 MiB every 0.3 s -- ~5 s for the whole answer,
    far past the time-out -- makes progress at every reaper pass and gets all of it."""
    running, port = listener
    stuck, slow = _ask_big(port, reading=False), _ask_big(port, reading=True)
    got = 0
    try:
        slow.settimeout(10)
        deadline = time.monotonic() + 30
        while got <= BIG and time.monotonic() < deadline:
            round_end = got + (1 << 20)
            while got < round_end and (chunk := slow.recv(round_end - got)):
                got += len(chunk)
            if got < round_end:
                break  # closed
            time.sleep(0.3)
        assert got > BIG  # the headers and the whole body
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        assert closed_by_peer(stuck, 5.0)  # reset: the rest of its answer was dropped
    finally:
        stuck.close()
        slow.close()
    assert running.guard.flood.totals["http_connections_stalled"] == 1
    wait_open(running, 0)


def test_flood_log_is_one_line_a_second_with_the_count() -> None:
    now = [100.0]
    log = FloodLog(clock=lambda: now[0])
    with capture_logs() as lines:
        for _ in range(1000):
            log.event("http_accept_failed", error="Too many open files")
        assert [line["count"] for line in lines] == [1]  # the first one at once
        now[0] += 0.5
        log.flush()
        assert len(lines) == 1  # not yet a second
        now[0] += 0.5
        log.flush()
        log.flush()
    assert [(line["event"], line["count"]) for line in lines] == [
        ("http_accept_failed", 1), ("http_accept_failed", 999)
    ]
    assert lines[-1]["error"] == "Too many open files"
