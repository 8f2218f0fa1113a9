"""The 12-byte request id (docs/protocol.md §3) and its pure freshness check (§3.1).

Layout, MongoDB ObjectId style: 4 bytes big-endian seconds since the epoch, 3 bytes machine id
(first bytes of MD5(hostname)), 2 bytes pid, 3 bytes counter (random start, wraps at 2^24).
Peers rely only on uniqueness and on the timestamp in bytes 0-3.
"""

from __future__ import annotations

import hashlib
import os
import random
import socket
import threading
import time
from typing import Final

from raftlog.entry import REQUEST_ID_SIZE, ZERO_REQUEST_ID

DEFAULT_REQUEST_ID_TTL_MS: Final = 8 * 3600 * 1000
DEFAULT_REQUEST_ID_ACCEPT_MARGIN_MS: Final = 15 * 60 * 1000
_COUNTER_MODULUS: Final = 1 << 24


def machine_id(hostname: str | None = None) -> bytes:
    """The 3-byte machine id the reference derives from the host name."""
    name = socket.gethostname() if hostname is None else hostname
    return hashlib.md5(name.encode("utf-8"), usedforsecurity=False).digest()[:3]


def make_request_id(seconds: int, machine: bytes, pid: int, counter: int) -> bytes:
    """Assemble a request id from its parts (pure; used by the generator and by tests)."""
    if len(machine) != 3:
        raise ValueError("machine id must be 3 bytes")
    return b"".join(
        (
            (seconds & 0xFFFFFFFF).to_bytes(4, "big"),
            machine,
            (pid & 0xFFFF).to_bytes(2, "big"),
            (counter % _COUNTER_MODULUS).to_bytes(3, "big"),
        )
    )


def request_id_seconds(request_id: bytes) -> int:
    """The timestamp (seconds since the epoch) carried in bytes 0-3 of a request id."""
    return int.from_bytes(request_id[:4], "big")


class _Counter:
    """A thread-safe 24-bit counter from a random start."""

    def __init__(self, start: int) -> None:
        self._next = start % _COUNTER_MODULUS
        self._lock = threading.Lock()

    def take(self) -> int:
        with self._lock:
            counter = self._next
            self._next = (counter + 1) % _COUNTER_MODULUS
        return counter

    def forked(self) -> None:
        """In a child after ``fork``: a new lock, since another thread of the parent may
        have held the old one at the fork and would never release it here."""
        self._lock = threading.Lock()


_PROCESS_COUNTER: Final = _Counter(random.SystemRandom().randrange(_COUNTER_MODULUS))
"""The counter every default generator of this process shares (below)."""
os.register_at_fork(after_in_child=_PROCESS_COUNTER.forked)


class RequestIdGenerator:
    """Thread-safe generator of unique request ids with an honest timestamp.

    Every generator built without ``counter_start`` takes its counter from one counter per
    process, as ObjectId's rule has it: the ids of two generators in one process (two
    clients, say) differ in the counter even within the same second. Each with a counter of
    its own from a random start, two clients whose starts were a few hundred apart made
    the same ids in the same second, and the cluster answered the second client's update
    as a retry of the first's -- acknowledged at the first's index, its own data never
    written (found by the clock-step fault schedule's checker, 2026-11-27). After a fork
    the child's pid bytes differ, so parent and child cannot collide either."""

    def __init__(
        self,
        machine: bytes | None = None,
        pid: int | None = None,
        counter_start: int | None = None,
    ) -> None:
        self._machine = machine_id() if machine is None else machine
        self._pid = os.getpid() if pid is None else pid
        self._counter = _PROCESS_COUNTER if counter_start is None else _Counter(counter_start)

    def next(self, now_seconds: int | None = None) -> bytes:
        """A fresh request id stamped with ``now_seconds`` (default: the wall clock)."""
        seconds = int(time.time()) if now_seconds is None else now_seconds
        return make_request_id(seconds, self._machine, self._pid, self._counter.take())


def is_fresh(
    request_id: bytes,
    now_ms: int,
    ttl_ms: int | None = DEFAULT_REQUEST_ID_TTL_MS,
    margin_ms: int = DEFAULT_REQUEST_ID_ACCEPT_MARGIN_MS,
    latest_ms: int | None = None,
) -> bool:
    """Would a leader whose cluster clock (``raftlog.cluster_clock``) reads ``now_ms`` accept
    this never-seen request id?

    Accepted iff ``now - (ttl - margin) <= t <= max(now, latest) + margin`` with ``t`` the id's
    timestamp in ms; ``ttl_ms=None`` disables time checks (every id is accepted). The lower
    edge is what makes deduplication exact: an id is forgotten only once ``t < now - ttl``
    (``is_expired``) by the same never-decreasing clock, so a retry of a forgotten id is
    always refused here. The upper edge only bounds how long an id stays remembered, so it may
    use ``latest_ms`` (the leader's wall clock): after a whole-cluster outage the cluster clock
    resumes behind real time, and honest client ids must not look as if from the future.
    """
    return FreshWindow.at(now_ms, ttl_ms, margin_ms, latest_ms).admits(request_id)


class FreshWindow:
    """``is_fresh``'s rule with its edges computed once: a leader checks every request id of
    a proposal batch against the same clock reading (issue #28: per id, the edges and three
    calls cost more than the comparison)."""

    __slots__ = ("high_ms", "low_ms")

    def __init__(self, low_ms: int | None, high_ms: int) -> None:
        self.low_ms = low_ms
        """The oldest timestamp accepted (ms), or None: no time checks."""
        self.high_ms = high_ms
        """The newest timestamp accepted (ms); unused when ``low_ms`` is None."""

    @classmethod
    def at(
        cls,
        now_ms: int,
        ttl_ms: int | None = DEFAULT_REQUEST_ID_TTL_MS,
        margin_ms: int = DEFAULT_REQUEST_ID_ACCEPT_MARGIN_MS,
        latest_ms: int | None = None,
    ) -> FreshWindow:
        """The window ``is_fresh`` applies at these readings (no edges when ``ttl_ms`` is
        None: then only the id's size and the zero id are refused)."""
        if ttl_ms is None:
            return cls(None, 0)
        newest = now_ms if latest_ms is None or latest_ms < now_ms else latest_ms
        return cls(now_ms - (ttl_ms - margin_ms), newest + margin_ms)

    def admits(self, request_id: bytes) -> bool:
        """``is_fresh`` of ``request_id`` at this window's readings."""
        if len(request_id) != REQUEST_ID_SIZE or request_id == ZERO_REQUEST_ID:
            return False
        low = self.low_ms
        if low is None:
            return True
        t = int.from_bytes(request_id[:4], "big") * 1000  # request_id_seconds, inlined
        return low <= t <= self.high_ms


def is_expired(
    request_id: bytes, now_ms: int, ttl_ms: int | None = DEFAULT_REQUEST_ID_TTL_MS
) -> bool:
    """Should a cached request id be forgotten (``t < now - ttl``)? ``now_ms`` is the log
    clock a peer has applied (never its wall clock), so every peer forgets the same ids at the
    same applied index (issue #24)."""
    if ttl_ms is None:
        return False
    return request_id_seconds(request_id) * 1000 < now_ms - ttl_ms
