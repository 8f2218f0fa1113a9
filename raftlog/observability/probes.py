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
from raftlog.storage.base import HardState, ReadyStore


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
