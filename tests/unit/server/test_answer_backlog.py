"""The answer backlog on a real TCP connection: answers count against the connection their
routing id came from, what the client's TCP stack acknowledged is subtracted, and a client
past the limit is shed once and stays shed (its later messages and waiting reads dropped),
while one that reads is never shed however much it is sent."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator

import pytest

from raftlog.server import answer_backlog
from raftlog.server.answer_backlog import AnswerBacklog, bytes_acked


class Connections:
    """The part of ``ConnectionBacklog`` the answer backlog uses, over known descriptors."""

    def __init__(self, *fds: int) -> None:
        self.inodes = {fd: os.fstat(fd).st_ino for fd in fds}
        self.shed_calls: list[tuple[int, str, int]] = []

    def identity(self, fd: int) -> int | None:
        return self.inodes.get(fd)

    def shed(self, fd: int, reason: str, backlog: int = 0, limit: int | None = None) -> bool:
        self.shed_calls.append((fd, reason, backlog))
        return True


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        served, _ = server.accept()
        with client, served:
            yield served, client


def test_a_client_that_reads_is_never_shed(pair: tuple[socket.socket, socket.socket]) -> None:
    served, client = pair
    conns = Connections(served.fileno())
    backlog = AnswerBacklog(1000, conns)  # type: ignore[arg-type]
    start = bytes_acked(served.fileno()) or 0
    for n in range(1, 21):
        assert backlog.admit(b"reader", served.fileno())
        served.sendall(b"a" * 700)  # the answer itself, on the wire
        backlog.sent(b"reader", 700)
        assert len(client.recv(700, socket.MSG_WAITALL)) == 700  # read
        deadline = time.monotonic() + 5  # and acknowledged (an ACK may be delayed ~40 ms)
        while (bytes_acked(served.fileno()) or 0) - start < 700 * n:
            assert time.monotonic() < deadline
            time.sleep(0.005)
    assert backlog.admit(b"reader", served.fileno()) and conns.shed_calls == []


def test_a_client_leaving_answers_unread_is_shed_once_and_stays_shed(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    served, _client = pair
    fd = served.fileno()
    conns = Connections(fd)
    backlog = AnswerBacklog(1000, conns)  # type: ignore[arg-type]
    assert backlog.admit(b"silent", fd)
    backlog.sent(b"silent", 900)  # queued in libzmq, say: nothing reached the client
    assert backlog.admit(b"silent", fd) and not backlog.over(b"silent")
    backlog.sent(b"silent", 200)
    assert not backlog.admit(b"silent", fd)  # 1,100 unread: shed, the message dropped
    assert conns.shed_calls == [(fd, "answer_backlog", 1100)]
    assert backlog.over(b"silent")  # its waiting reads: dropped too
    backlog.sent(b"silent", 10_000)  # answers still on their way are not counted again
    assert conns.shed_calls == [(fd, "answer_backlog", 1100)]
    assert not backlog.admit(b"silent", fd)  # what libzmq still hands over: dropped
    assert not backlog.admit(b"other-id", fd)  # whatever routing id it comes under
    conns.inodes.clear()  # no longer tracked, not yet closed by libzmq: still dropped
    assert not backlog.admit(b"silent", fd)
    assert conns.shed_calls == [(fd, "answer_backlog", 1100)]


def test_descriptors_not_tracked_are_not_bounded_and_gone_ones_are_forgotten(
    pair: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch,
) -> None:
    served, _client = pair
    fd = served.fileno()
    conns = Connections(fd)
    backlog = AnswerBacklog(1000, conns)  # type: ignore[arg-type]
    assert backlog.admit(b"inproc", -1) and backlog.admit(b"unknown", fd + 1000)
    backlog.sent(b"inproc", 10_000)
    assert not backlog.over(b"inproc") and conns.shed_calls == []
    monkeypatch.setattr(answer_backlog, "PRUNE_FROM", 4)
    backlog._prune_at = 4
    for n in range(6):
        backlog.admit(b"r%d" % n, fd)
    conns.inodes.clear()  # the connection is gone
    backlog.admit(b"late", fd)  # not tracked: ignored
    backlog._prune()
    assert backlog._fd_of == {} and backlog._sent == {}
