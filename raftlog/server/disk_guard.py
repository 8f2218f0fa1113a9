"""The disk guard: below ``min_free_disk_bytes`` of free space in the data directory, the
peer refuses new data (issue #33 item 10).

Why: a peer whose disk fills fails its next synced write and stops -- on every peer at once
when they share the load, which loses the cluster. Refusing *publishes* early keeps the
cluster up and leaves room for what frees space: topic deletes, retention and compaction go
on (they are not data), and once enough is free again publishes are accepted by themselves,
with no operator action.

What is refused (``adds_data``): plain RequestUpdates (a reference client's data: no typed
answer exists in the reference protocol, so it gets none, like an oversized update), record
batches and transactional stores. A ``TP`` publish gets the typed error ``DiskFull``.
Topic commands (create, delete, config), transaction commit/abort and the leader's own
entries (checkpoints, clock ticks, configuration changes) still pass. Checked every
housekeeping pass (1 s) with ``shutil.disk_usage``, so it costs nothing per request.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from raftlog.errors import TopicError
from raftlog.server.interfaces import EventLog
from raftlog.topics.record_scan import summarize_batch
from raftlog.topics.records import RecordBatch, is_topic_data
from raftlog.topics.records_tx import TxStore, decode_any_entry


def disk_full_error(free: int, threshold: int) -> TopicError:
    """The typed refusal a publish gets while the disk is low."""
    return TopicError(
        "DiskFull",
        f"the leader's disk has {free} bytes free, below min_free_disk_bytes {threshold}: "
        "publishes are refused until space is freed (deletes, retention and compaction "
        "still run)",
    )


def adds_data(data: bytes) -> bool:
    """True for an update that stores new data (see the module docstring)."""
    if not is_topic_data(data):
        return True
    if summarize_batch(data) is not None:
        return True
    try:
        entry = decode_any_entry(data)
    except ValueError:
        return True  # malformed: the gate refuses it anyway
    return isinstance(entry, RecordBatch | TxStore)


class DiskGuard:
    """Watches free space in ``path``; ``low`` is True while it is below ``threshold``."""

    def __init__(
        self,
        path: Path,
        threshold: int,
        log: EventLog,
        free_bytes: Callable[[Path], int] = lambda p: shutil.disk_usage(p).free,
    ) -> None:
        self._path = path
        self.threshold = threshold
        self._log = log
        self._free_bytes = free_bytes
        self.free = -1
        """Free bytes at the last check (-1 while unknown)."""
        self.low = False
        self.check()

    def check(self) -> None:
        """Measure again; log each change of state (warning when low, info when back)."""
        if self.threshold <= 0:
            return
        try:
            self.free = self._free_bytes(self._path)
        except OSError as exc:  # keep the last verdict: a failed statvfs is no evidence
            self._log.warning("disk_check_failed", error=str(exc))
            return
        low = self.free < self.threshold
        if low != self.low:
            self.low = low
            event = "disk_low_publishes_refused" if low else "disk_ok_publishes_resumed"
            (self._log.warning if low else self._log.info)(
                event, free_bytes=self.free, min_free_disk_bytes=self.threshold
            )

    def refusal(self, data: bytes) -> TopicError | None:
        """The error for ``data`` while the disk is low, else None."""
        if self.low and adds_data(data):
            return disk_full_error(self.free, self.threshold)
        return None

