"""When the connection guard calls a connection's output stalled: pending output that has
not shrunk for the whole time-out; output that shrinks, or none, restarts the clock."""

from __future__ import annotations

import asyncio
from typing import cast

from raftlog.observability.guard_conn import GuardedConn


class _Transport:
    def __init__(self) -> None:
        self.size = 0

    def get_write_buffer_size(self) -> int:
        return self.size


def _conn() -> tuple[GuardedConn, _Transport]:
    transport = _Transport()
    return GuardedConn(0.0, "a", transport=cast(asyncio.BaseTransport, transport)), transport


def test_output_that_does_not_shrink_stalls_after_the_timeout() -> None:
    conn, transport = _conn()
    transport.size = 1000
    assert not conn.write_stalled(10.0, 3.0)  # first seen: the clock starts
    assert not conn.write_stalled(12.0, 3.0)
    transport.size = 1500  # more written, nothing taken: still no progress
    assert not conn.write_stalled(13.0, 3.0)
    assert conn.write_stalled(13.5, 3.0)


def test_progress_or_an_empty_buffer_restarts_the_clock() -> None:
    conn, transport = _conn()
    transport.size = 1000
    conn.write_stalled(10.0, 3.0)
    transport.size = 900  # the client took 100 bytes
    assert not conn.write_stalled(12.5, 3.0)
    assert not conn.write_stalled(15.0, 3.0)
    assert conn.write_stalled(15.6, 3.0)
    transport.size = 0
    assert not conn.write_stalled(30.0, 3.0)
    transport.size = 10  # a new answer pending: a new clock
    assert not conn.write_stalled(31.0, 3.0) and conn.write_stalled(34.1, 3.0)


def test_a_handshake_without_a_transport_never_stalls() -> None:
    conn = GuardedConn(0.0, "a")
    assert not conn.write_stalled(100.0, 1.0) and conn.pending == 0
