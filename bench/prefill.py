"""Peers' data directories holding a long committed log, written without a cluster.

Why: measuring how a cluster behaves on a log of millions of entries must not first spend
an hour committing them one RequestUpdate at a time. The log is written with raftlog's own
storage API (``open_storage``: the same records, checksums and request-id index a peer
writes), the hard state says everything is applied, and the topic index is told it has
seen the whole log (there are no topic entries in it), as on a peer that ran. One peer's
directory is written and copied for the others (a closed RocksDB directory is plain files).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from raftlog.entry import LogEntry
from raftlog.storage.base import HardState
from raftlog.storage.rocks import open_storage
from raftlog.topics.index import TopicIndex
from raftlog.topics.machine import TOPICS_DIR

BATCH = 16_384


def write_log(data_dir: Path, entries: int, size: int = 100, term: int = 1) -> float:
    """Write ``entries`` committed STATE entries of ``size`` bytes (each with its own request
    id) into a new peer directory; returns the seconds it took."""
    t0 = time.perf_counter()
    store, hard, snaps = open_storage(data_dir)
    try:
        stamp = int(time.time()).to_bytes(4, "big")
        data = b"d" * size
        for first in range(1, entries + 1, BATCH):
            n = min(BATCH, entries + 1 - first)
            store.append(
                first,
                [LogEntry(stamp + (first + k).to_bytes(8, "big"), 0, term, data) for k in range(n)],
            )
        hard.save(HardState(current_term=term, last_applied=entries))
        # Leave the tables as a peer that wrote this log over time would have them: the
        # compactions a bulk load owes would otherwise run in the peers being measured.
        store.database.compact_all()
    finally:
        store.close(), hard.close(), snaps.close()
    topics = TopicIndex(data_dir / TOPICS_DIR)
    try:
        batch = topics.batch()
        topics.put_position(batch, entries, 0)
        topics.write(batch, "bench prefill", sync=True)
    finally:
        topics.close()
    return time.perf_counter() - t0


def prefill(data_dirs: Sequence[Path], entries: int, size: int = 100) -> float:
    """``write_log`` into the first directory, copied to the others; seconds in all."""
    t0 = time.perf_counter()
    write_log(data_dirs[0], entries, size)
    for other in data_dirs[1:]:
        shutil.copytree(data_dirs[0], other)
    return time.perf_counter() - t0
