"""A bound on what one connection can make libzmq buffer in the peer (issue #25, finding 2).

Why this exists: libzmq (4.3.5) limits each *frame* (``MAXMSGSIZE``) but neither the sum of
a message's frames nor their number, and it holds every frame of a multipart message until
the last one has arrived -- the application cannot see, let alone drop, a message while it
grows. A client (any client on a plaintext cluster; any admitted key, a reader's included,
on a CURVE one) could send one endless message of 10 MiB frames and the peer's memory grew
until the kernel killed it.

How: the kernel counts every byte received on each TCP connection (``TCP_INFO``
``tcpi_bytes_received``); the peer counts the bytes of every message it takes from the
ROUTER, by connection (libzmq tells which: the ``SRCFD`` property of a message). What was
received and not yet taken -- the *backlog*, messages libzmq holds, complete or not -- is
the difference, less a per-frame allowance for the ZMTP/CURVE framing. A connection whose
backlog passes ``limit`` is shut down (``shutdown(2)`` on its descriptor: libzmq sees the
connection end, drops what it held and closes it). So at most ``limit`` bytes of wire data
per connection wait in libzmq, whatever the message looks like.

The check runs on the ROUTER's monitor thread (``raftlog.observability.connections``),
which learns each connection's descriptor when it is accepted: every ``SCAN_INTERVAL`` it
reads the process's resident size and scans the connections only when that grew by
``SCAN_GROWTH`` since the last scan, or ``FULL_SCAN_INTERVAL`` passed -- one ``getsockopt``
per connection, so 10,000 idle connections cost one scan a second. A descriptor is
identified by its socket inode, so a descriptor number reused by a new connection is never
shut down for the old one's backlog.

ZMTP heartbeat commands (PING, PONG) are read by libzmq and never taken by the peer, yet the
kernel counts them: an idle connection would grow a backlog of heartbeats forever -- a peer's
link to the leader, which carries nothing but its PINGs every 0.5 s, by ~80 bytes a second
with CURVE: over ``SLACK`` within a quarter of an hour (then the first to be shed whenever
the process is over ``memory_high``) and over a 20 MiB limit within three days. So each
connection is allowed ``command_bytes_per_s`` for every second since it was accepted (what
the heartbeats it can legitimately carry cost, ``COMMAND_SIZE`` each; a remote that PINGs
faster than a raftlog peer link, every 0.5 s, outgrows it): a connection that
trickles a message slowly gains that much room, which ``memory_high`` bounds in sum.

The same thread caps connections (finding 4): at most ``max_connections`` -- by default the
descriptor limit less a reserve for the peer's own files, so a flood never takes the
descriptors RocksDB, snapshots and the other listeners need -- and optionally at most
``per_address`` from one source address. A connection over a cap makes room by shedding the
oldest *idle* connection (one that never sent a whole message: a flood of half-open or
silent connections) of the same scope, else it is shed itself; so a client that talks --
another peer, a probe -- gets in even while a flood holds the cap.

Limits of the bound (docs/operations.md, "Message size"): it counts wire bytes, and libzmq
keeps a frame of up to 33 bytes in a 64-byte slot, so a message of one-byte frames can hold
up to ~20x its wire size in memory -- which is why ``memory_high`` additionally sheds the
connection with the largest backlog whenever the process's resident size passes it; between
two scans a fast sender can add up to one ``SCAN_INTERVAL`` of loopback bandwidth.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Final

import structlog

from raftlog.metrics import Counter

SCAN_INTERVAL: Final = 0.02
"""Seconds between two looks at the resident size."""
SCAN_GROWTH: Final = 4 * 1024 * 1024
"""Resident growth (bytes) since the last scan that triggers a scan."""
FULL_SCAN_INTERVAL: Final = 1.0
"""Seconds after which the connections are scanned anyway."""
FRAME_ALLOWANCE: Final = 64
"""Wire bytes of framing per frame taken (ZMTP header <= 9, CURVE box 33, command name 8)."""
SLACK: Final = 64 * 1024
"""Handshake and the frames of a message being taken: never counted as backlog."""
COMMAND_SIZE: Final = 64
"""Wire bytes allowed per ZMTP heartbeat command (PING or PONG: 9 in plaintext, 41 boxed by
CURVE, measured on libzmq 4.3.5)."""
_U64: Final = struct.Struct("=Q")
_BYTES_RECEIVED_OFFSET: Final = 128
"""``tcpi_bytes_received`` in Linux's ``struct tcp_info`` (since Linux 4.1)."""
_PAGE: Final = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

log = structlog.get_logger("raftlog.limits")


def connection_cap(descriptors: int) -> int:
    """The default connection cap: half of ``descriptors`` less a reserve of a tenth (at
    least 256) for the peer's own files and outgoing sockets -- the other half is the HTTP
    listener's, so neither listener can starve the other."""
    return max(16, (descriptors - max(256, descriptors // 10)) // 2)


def tcp_info_u64(fd: int, offset: int) -> int | None:
    """The 64-bit counter at ``offset`` of TCP socket ``fd``'s ``struct tcp_info`` (None:
    not TCP, or a kernel too old to have it)."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    except OSError:
        return None
    finally:
        sock.detach()  # libzmq owns the descriptor
    if len(info) < offset + 8:
        return None
    value: int = _U64.unpack_from(info, offset)[0]
    return value


def bytes_received(fd: int) -> int | None:
    """What the kernel received on TCP socket ``fd`` so far (None: not TCP, or unknown)."""
    return tcp_info_u64(fd, _BYTES_RECEIVED_OFFSET)


_statm: list[int] = []
"""The descriptor of ``/proc/self/statm``, opened once: the monitor thread reads it 50 times
a second, and an ``open``/``close`` pair per read (plus the file object) cost more than the
read itself on the loop's core (issue #28)."""


def resident_bytes() -> int:
    """The process's resident set size (0 where /proc is missing)."""
    try:
        if not _statm:
            _statm.append(os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC))
        return int(os.pread(_statm[0], 128, 0).split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _source(fd: int) -> str:
    """The source address of TCP socket ``fd`` ("" if unknown)."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        return ""
    try:
        peer = sock.getpeername()
    except OSError:
        return ""
    finally:
        sock.detach()
    return str(peer[0]) if isinstance(peer, tuple) else str(peer)


def socket_inode(fd: int) -> int | None:
    """The inode of the socket on descriptor ``fd`` (None: closed): what tells a connection
    from a later one that reuses the descriptor number."""
    try:
        return os.fstat(fd).st_ino
    except OSError:
        return None


class ConnectionBacklog:
    """Per-connection backlog accounting and shedding (see the module docstring).

    ``taken`` runs on the loop's thread, everything else on the monitor thread; the shared
    dict is only ever updated by single ``dict`` operations (atomic under the GIL)."""

    def __init__(
        self,
        limit: int,
        memory_high: int,
        shed: Counter,
        *,
        owner: str,
        max_connections: int = 0,
        per_address: int = 0,
        commands_per_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        scope: str = "",
    ) -> None:
        self.limit = limit
        self._scope = scope
        """Prefixed to every shedding reason (``"broadcast_"`` for the PUB's connections)."""
        self.memory_high = memory_high
        """Resident bytes above which the largest backlog is shed (0: never)."""
        self.max_connections = max_connections
        """Connections at most (0: no cap)."""
        self.per_address = per_address
        """Connections from one source address at most (0: no cap)."""
        self.command_bytes_per_s = COMMAND_SIZE * commands_per_s
        """Backlog allowed per second of a connection's age for the heartbeat commands it
        carries (``commands_per_s`` of them: see the module docstring)."""
        self._clock = clock
        self._shed = shed
        self._owner = owner
        self._taken: dict[int, int] = {}
        """fd -> wire bytes the loop took from it (payload + framing allowance)."""
        self._conns: dict[int, tuple[int, int, float]] = {}
        """fd -> (socket inode, bytes received when it was accepted, when), in accept
        order."""
        self._address: dict[int, str] = {}
        """fd -> source address."""
        self._by_address: dict[str, int] = {}
        self._next_scan = 0.0
        self._next_full = 0.0
        self._scanned_rss = resident_bytes()
        self._lock = threading.Lock()  # accepted/closed/scan: all on the monitor thread
        self.unread_answers: Callable[[], list[tuple[int, int, int]]] = list
        """``(fd, inode, bytes)`` of the answers each connection leaves unread
        (``AnswerBacklog.unread``, set by its owner): above ``memory_high`` the largest
        backlog either way is shed."""

    # -- the loop's side -------------------------------------------------------------------
    @property
    def tally(self) -> dict[int, int]:
        """fd -> bytes taken, the dict :meth:`taken` adds to: the compiled receive of a run
        of messages (``raftlog.transport.take_run``) adds each message's size plus
        ``FRAME_ALLOWANCE`` per frame to it directly, on the loop's thread like ``taken``."""
        return self._taken

    def taken(self, fd: int, size: int, frames: int) -> None:
        """The loop took a message of ``frames`` frames and ``size`` payload bytes from
        connection ``fd``."""
        self._taken[fd] = self._taken.get(fd, 0) + size + FRAME_ALLOWANCE * frames

    # -- the monitor thread's side ---------------------------------------------------------
    def accepted(self, fd: int) -> None:
        """A connection was accepted on descriptor ``fd``: track it, and enforce the caps."""
        inode = socket_inode(fd)
        received = bytes_received(fd)
        if inode is None or received is None:
            return
        address = _source(fd)
        with self._lock:
            known = self._conns.get(fd)
            if known is not None and known[0] == inode:
                return  # tracked already (:meth:`track` came first)
            self._conns[fd] = (inode, received, self._clock())
            self._address[fd] = address
            self._by_address[address] = self._by_address.get(address, 0) + 1
        if self.per_address and self._by_address.get(address, 0) > self.per_address:
            self._make_room(fd, "per_address", address)
        elif self.max_connections and len(self._conns) > self.max_connections:
            self._make_room(fd, "max_connections", None)

    def _make_room(self, newcomer: int, reason: str, address: str | None) -> None:
        """Shed the oldest idle connection (of ``address``, if given), else ``newcomer``.
        The walk stops at the first idle one: under a flood of idle connections that is one
        of the first few (the dict keeps accept order), so each accept stays cheap."""
        victim = newcomer
        with self._lock:
            for fd in self._conns:
                if fd != newcomer and self._taken.get(fd, 0) == 0 and (
                    address is None or self._address.get(fd) == address
                ):
                    victim = fd
                    break
        if not self._shed_one(victim, 0, reason) and victim != newcomer:
            self.closed(victim)  # gone meanwhile
            self._shed_one(newcomer, 0, reason)

    def closed(self, fd: int) -> None:
        """The connection on ``fd`` is gone."""
        with self._lock:
            if self._conns.pop(fd, None) is not None:
                address = self._address.pop(fd, "")
                left = self._by_address.get(address, 1) - 1
                if left > 0:
                    self._by_address[address] = left
                else:
                    self._by_address.pop(address, None)
        self._taken.pop(fd, None)

    def track(self, fd: int) -> int | None:
        """:meth:`identity`, tracking the connection on ``fd`` first if the monitor thread
        has not yet (None: not a TCP connection, or gone). Why: the loop may take a new
        connection's first request before that thread, which needs the GIL, has handled its
        accept event; a quota that let untracked connections pass would then be open to
        whoever sends at once. The accept event that follows changes nothing."""
        inode = self.identity(fd)
        if inode is None and fd >= 0:
            self.accepted(fd)
            inode = self.identity(fd)
        return inode

    def identity(self, fd: int) -> int | None:
        """The socket inode of the connection tracked on ``fd`` (None: none): what tells a
        connection from a later one that reuses the descriptor number. A dict lookup, no
        system call (the quota on connections asks it per request)."""
        known = self._conns.get(fd)
        return None if known is None else known[0]

    def shed(self, fd: int, reason: str, backlog: int = 0, limit: int | None = None) -> bool:
        """Shut the connection on ``fd`` down now (a principal over its connections quota; a
        client leaving its answers unread, ``raftlog.server.answer_backlog``, whose
        ``backlog`` and ``limit`` the log line shows); False if it is gone already."""
        return bool(self._shed_one(fd, backlog, reason, limit))

    @property
    def connections(self) -> int:
        """Connections tracked now."""
        return len(self._conns)

    def backlog(self, fd: int) -> int | None:
        """Wire bytes received on ``fd`` and not taken yet (None: not a live connection)."""
        known = self._conns.get(fd)
        if known is None or socket_inode(fd) != known[0]:
            return None
        received = bytes_received(fd)
        if received is None:
            return None
        commands = int((self._clock() - known[2]) * self.command_bytes_per_s)
        return received - known[1] - self._taken.get(fd, 0) - SLACK - commands

    def tick(self, now: float) -> None:
        """Scan when due (see the module docstring)."""
        if now < self._next_scan:
            return
        self._next_scan = now + SCAN_INTERVAL
        rss = resident_bytes()
        self._scanned_rss = min(self._scanned_rss, rss)  # growth counts from the low point
        over_high = bool(self.memory_high) and rss > self.memory_high
        if rss - self._scanned_rss < SCAN_GROWTH and now < self._next_full and not over_high:
            return
        self._scanned_rss = rss
        self._next_full = now + FULL_SCAN_INTERVAL
        self.scan(rss)

    def scan(self, rss: int) -> int:
        """Shed every connection over ``limit``, and while the process is above
        ``memory_high``, the largest backlog; returns how many were shed."""
        with self._lock:
            fds = list(self._conns)
        worst: tuple[int, int] | None = None
        shed = 0
        for fd in fds:
            backlog = self.backlog(fd)
            if backlog is None:
                continue
            if backlog > self.limit:
                shed += self._shed_one(fd, backlog, "connection_backlog")
            elif backlog > 0 and (worst is None or backlog > worst[1]):
                worst = (fd, backlog)
        if self.memory_high and rss > self.memory_high:
            for fd, inode, unread in self.unread_answers():  # answers left unread count too
                if unread > 0 and (worst is None or unread > worst[1]) and \
                        self.identity(fd) == inode:
                    worst = (fd, unread)
            if worst is not None:
                shed += self._shed_one(worst[0], worst[1], "memory_high")
        return shed

    def _shed_one(self, fd: int, backlog: int, reason: str, limit: int | None = None) -> int:
        known = self._conns.get(fd)
        if known is None or socket_inode(fd) != known[0]:
            return 0
        try:
            sock = socket.socket(fileno=fd)
        except OSError:
            return 0
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            return 0
        finally:
            sock.detach()
        self.closed(fd)
        reason = self._scope + reason
        count = self._shed.labels(reason=reason).inc()
        if count & (count - 1) == 0:  # 1st, 2nd, 4th...: bounded log under a flood
            log.warning("connection_shed", peer=self._owner, reason=reason, backlog=backlog,
                        limit=self.limit if limit is None else limit, count=count)
        return 1


__all__ = [
    "ConnectionBacklog", "bytes_received", "connection_cap", "resident_bytes", "socket_inode",
    "tcp_info_u64",
]
