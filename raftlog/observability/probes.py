"""Cheap hooks the peer's loop wraps around its own work to feed :mod:`raftlog.metrics`.

Why wrappers: the Ready executor and the stores are shared with the simulator and the
catch-up; timing them here keeps the consensus path free of metrics code, and a peer without
metrics simply does not wrap.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from raftlog.entry import LogEntry
from raftlog.metrics import PeerMetrics
from raftlog.rpc.messages import InstallSnapshot, Peer, PeerRequest, PeerResponse
from raftlog.server.ready_executor import Outbox
from raftlog.storage.base import HardState, ReadyStore, SnapshotMeta, SnapshotStore


class TimedReadyStore:
    """A :class:`~raftlog.storage.base.ReadyStore` that records each synced write's
    duration and entry count (two histogram observations: a bisect and three adds)."""

    def __init__(self, inner: ReadyStore, metrics: PeerMetrics) -> None:
        self._inner = inner
        self._seconds = metrics.fsync_seconds.labels()
        self._batch = metrics.fsync_batch_entries.labels()
        self._appended = metrics.entries_appended.labels()

    def persist(
        self, hard_state: HardState | None, first_index: int, entries: Sequence[LogEntry] | None
    ) -> None:
        """``inner.persist`` (durable on return, as there), timed."""
        started = time.perf_counter()
        self._inner.persist(hard_state, first_index, entries)
        self._seconds.observe(time.perf_counter() - started)
        if entries:
            self._batch.observe(len(entries))
            self._appended.inc(len(entries))


def counting_applied(
    on_applied: Callable[[int], None], metrics: PeerMetrics, applied: int
) -> Callable[[int], None]:
    """``on_applied`` that first counts the entries applied since the last call (starting
    from ``applied``, the index restored at start-up)."""
    counter = metrics.entries_applied.labels()
    last = applied

    def wrapped(index: int) -> None:
        nonlocal last
        if index > last:
            counter.inc(index - last)
            last = index
        on_applied(index)

    return wrapped


class ReceivedSnapshots:
    """The Ready executor's :class:`~raftlog.storage.base.SnapshotStore`, counting the
    snapshots this peer receives from a leader: a transfer starts at the chunk that begins
    a new snapshot (``begin`` returning 0 for a new index/term) and ends when ``finish``
    installs it. Every call is passed through unchanged."""

    def __init__(self, inner: SnapshotStore, metrics: PeerMetrics) -> None:
        self._inner = inner
        self._count = metrics.snapshot_transfers.labels(direction="received")
        self._bytes = metrics.snapshot_transfer_bytes.labels(direction="received")
        self._seconds = metrics.snapshot_transfer_seconds.labels(direction="received")
        self._pending: tuple[int, int] | None = None
        self._started = 0.0

    def meta(self) -> SnapshotMeta | None:
        """As ``inner.meta``."""
        return self._inner.meta()

    def read(self, offset: int, size: int) -> bytes:
        """As ``inner.read``."""
        return self._inner.read(offset, size)

    def install(self, index: int, term: int, data: bytes) -> SnapshotMeta:
        """As ``inner.install`` (a local snapshot: not a transfer)."""
        return self._inner.install(index, term, data)

    def begin(self, index: int, term: int, total_size: int) -> int:
        """As ``inner.begin``; a new snapshot starting from byte 0 starts the clock."""
        received = self._inner.begin(index, term, total_size)
        if received == 0 and self._pending != (index, term):
            self._pending = (index, term)
            self._started = time.monotonic()
        return received

    def write_chunk(self, offset: int, data: bytes) -> int:
        """As ``inner.write_chunk``."""
        return self._inner.write_chunk(offset, data)

    def finish(self) -> SnapshotMeta:
        """As ``inner.finish`` (durable on return); counts the completed transfer."""
        meta = self._inner.finish()
        if self._pending is not None:
            self._seconds.observe(time.monotonic() - self._started)
            self._pending = None
        self._count.inc()
        self._bytes.inc(meta.size)
        return meta

    def close(self) -> None:
        """As ``inner.close``."""
        self._inner.close()


class SentSnapshots:
    """The Ready executor's outbox, counting the snapshots this leader sends: a transfer to
    a follower starts with its chunk at offset 0 and completes with the chunk that reaches
    the snapshot's total size. A retransmission (the chunk at the same snapshot index and
    offset as the last one sent to that follower) is not a new chunk; only that pair is
    remembered, never the chunk's data."""

    def __init__(self, inner: Outbox, metrics: PeerMetrics) -> None:
        self._inner = inner
        self._count = metrics.snapshot_transfers.labels(direction="sent")
        self._bytes = metrics.snapshot_transfer_bytes.labels(direction="sent")
        self._seconds = metrics.snapshot_transfer_seconds.labels(direction="sent")
        self._started: dict[str, tuple[int, float]] = {}
        self._last: dict[str, tuple[int, int]] = {}

    def connect(self, peers: Sequence[Peer]) -> None:
        """As ``inner.connect``."""
        self._inner.connect(peers)

    def send_request(self, to: str, message: PeerRequest) -> None:
        """As ``inner.send_request``; InstallSnapshot chunks are timed per follower."""
        self._inner.send_request(to, message)
        if isinstance(message, InstallSnapshot):
            key = (message.last_included_index, message.offset)
            if self._last.get(to) != key:
                self._last[to] = key
                self._chunk(to, message)

    def _chunk(self, to: str, chunk: InstallSnapshot) -> None:
        now = time.monotonic()
        started = self._started.get(to)
        if chunk.offset == 0 or started is None or started[0] != chunk.last_included_index:
            started = self._started[to] = (chunk.last_included_index, now)
        if chunk.offset + len(chunk.data) >= chunk.total_size:
            del self._started[to]
            self._count.inc()
            self._bytes.inc(chunk.total_size)
            self._seconds.observe(now - started[1])

    def send_reply(self, token: object, message: PeerResponse) -> None:
        """As ``inner.send_reply``."""
        self._inner.send_reply(token, message)
