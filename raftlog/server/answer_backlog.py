"""``AnswerBacklog``: a bound on the answers one ROUTER connection leaves unread in the peer.

Why: libzmq queues a peer's answers to each connection until the client's TCP stack takes
them, up to ``ROUTER_HIGH_WATER_MARK`` *messages* (100,000), whatever their size. A client
that pipelines requests with large answers and never reads them made the peer hold every
answer: one DEALER sending 2,000 topic reads of a 2 MiB record grew a leader from 76 to
2,241 MiB; 2,000 *waiting* reads of an empty topic, woken together by one 2 MiB record,
to 3,641 MiB, and the leader stopped answering (``tests/faults/test_parked_read_flood.py``).
``raftlog.server.backlog`` bounds what a connection sends to the peer; this bounds what the
peer sends back.

How: the loop knows which connection (libzmq's ``SRCFD``) each message it takes came from,
and remembers it by the message's routing id (:meth:`admit`); every answer sent to that
routing id -- at once, or later: after a commit, an apply, a waiting read -- adds its bytes
to the connection's count (:meth:`sent`, from ``ReplySender.reply``), and the kernel counts
the bytes the client's TCP stack acknowledged (``TCP_INFO`` ``tcpi_bytes_acked``). What
was sent and not acknowledged -- answers libzmq still queues, and the kernel's send buffer
-- is the backlog. Before the loop handles another message of a connection (:meth:`admit`)
or reads a waiting read again (:meth:`over`), a backlog past ``limit`` sheds the connection
(``shutdown(2)``: libzmq drops what it queued for it), counted as
``raftlog_connections_shed{reason="answer_backlog"}``. The check costs two dict lookups while
the count stays below the limit since the last acknowledgement read; only then one
``getsockopt``. The RequestUpdates of a compiled run (``transport.take_run``) and their
answers (~20 bytes each) are not counted.

The acknowledged bytes include ZMTP's (and CURVE's) framing, so the backlog is never
overestimated: a client that reads is never shed, however large its answers. A connection
is told from a later one on the same descriptor by its socket inode, as in
``raftlog.server.backlog``.
"""

from __future__ import annotations

from typing import Final

from raftlog.server.backlog import ConnectionBacklog, socket_inode, tcp_info_u64

_BYTES_ACKED_OFFSET: Final = 120
"""``tcpi_bytes_acked`` in Linux's ``struct tcp_info`` (since Linux 4.1)."""
DEFAULT_LIMIT: Final = 64 * 1024 * 1024
"""The backlog past which a connection is shed when ``max_answer_backlog`` is 0: sixteen
topic reads of 4 MiB (``topics.reads.READ_BUDGET``) waiting to be read."""
PRUNE_FROM: Final = 4096
"""Routing ids remembered before the first sweep of connections gone."""


def bytes_acked(fd: int) -> int | None:
    """What the remote TCP stack acknowledged on socket ``fd`` so far (None: not TCP)."""
    return tcp_info_u64(fd, _BYTES_ACKED_OFFSET)


class AnswerBacklog:
    """Answer bytes per connection against what its client acknowledged (module docstring).
    Used on the loop's thread only."""

    def __init__(self, limit: int, connections: ConnectionBacklog) -> None:
        self.limit = limit
        self._connections = connections
        self._fd_of: dict[bytes, tuple[int, int]] = {}
        """routing id -> (fd, socket inode) of the connection it last came from: answers
        sent later (after a commit, an apply, a wait) find their connection by it."""
        self._prune_at = PRUNE_FROM
        self._sent: dict[int, list[int]] = {}
        """fd -> [socket inode, bytes sent, bytes acknowledged when last read]."""
        self._shed: set[int] = set()
        """Socket inodes of the connections shed: what libzmq still hands over from one
        before it sees the shutdown is dropped too, and its answers are not counted."""

    def admit(self, routing: bytes, fd: int) -> bool:
        """A message from connection ``fd`` under ``routing`` is about to be handled:
        remember where its answers go; False (and the connection shed) when that connection
        already leaves more than ``limit`` answer bytes unread -- drop the message."""
        if fd < 0:
            return True  # not a TCP connection (inproc): nothing to bound
        inode = self._connections.identity(fd)
        if inode is None:  # not tracked (yet, or no more: shed and not yet closed by libzmq)
            return socket_inode(fd) not in self._shed
        if inode in self._shed:
            return False
        where = (fd, inode)
        if self._fd_of.get(routing) != where:
            self._fd_of[routing] = where
            if len(self._fd_of) > self._prune_at:
                self._prune()
        return not self.over(routing)

    def sent(self, routing: bytes, size: int) -> None:
        """An answer of ``size`` bytes went to ``routing``."""
        where = self._fd_of.get(routing)
        if where is None or where[1] in self._shed:
            return
        fd, inode = where
        known = self._sent.get(fd)
        if known is None or known[0] != inode:
            acked = bytes_acked(fd)
            if acked is None:
                return
            known = self._sent[fd] = [inode, acked, acked]
        known[1] += size

    def over(self, routing: bytes) -> bool:
        """Whether the connection of ``routing`` has more than ``limit`` answer bytes
        unacknowledged; if so it is shed (shut down) now, and the caller drops what it was
        about to handle or answer."""
        where = self._fd_of.get(routing)
        if where is None:
            return False
        fd, inode = where
        if inode in self._shed:
            return True
        known = self._sent.get(fd)
        if known is None or known[0] != inode or known[1] - known[2] <= self.limit:
            return False
        if inode != self._connections.identity(fd):
            return False  # gone; a later connection on the descriptor starts afresh
        acked = bytes_acked(fd)
        if acked is not None:
            known[2] = acked
        backlog = known[1] - known[2]
        if backlog <= self.limit:
            return False
        del self._sent[fd]
        self._shed.add(inode)  # its later messages, answers and waiting reads: dropped
        self._connections.shed(fd, "answer_backlog", backlog, self.limit)
        return True

    def unread(self) -> list[tuple[int, int, int]]:
        """``(fd, socket inode, bytes unacknowledged)`` of every counted connection, the
        acknowledgements read afresh: the monitor thread's view when the process is above
        ``memory_high`` (``ConnectionBacklog.scan``). Safe off the loop's thread: one copy
        of the dict under the GIL, then only reads."""
        out = []
        for fd, (inode, sent, _acked) in list(self._sent.items()):
            acked = bytes_acked(fd)
            if acked is not None:
                out.append((fd, inode, sent - acked))
        return out

    def _prune(self) -> None:
        """Forget the routing ids and counts of connections gone (amortised: when the map
        doubled since the last time)."""
        identity = self._connections.identity
        self._fd_of = {r: w for r, w in self._fd_of.items() if identity(w[0]) == w[1]}
        self._sent = {fd: k for fd, k in self._sent.items() if identity(fd) == k[0]}
        self._shed = {w[1] for w in self._fd_of.values()} & self._shed
        self._prune_at = max(PRUNE_FROM, 2 * len(self._fd_of))


__all__ = ["DEFAULT_LIMIT", "PRUNE_FROM", "AnswerBacklog", "bytes_acked"]
