"""A *stopped* peer's log and hard state, opened for writing by the offline repair tools.

Why one home: ``raftlog-tool reset-term`` and ``raftlog-tool force-new-cluster`` both rewrite
a peer's durable state while it is down. Both must refuse a running peer in the same way
(RocksDB's ``LOCK`` file makes the open fail) and release the database on every path, or
the next start of the peer finds the lock held. Every write through the stores is synced
(``RocksLogStore.append``, ``RocksHardStateStore.save``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from raftlog.errors import StorageError
from raftlog.storage.rocks import LOG_DIR, RocksHardStateStore, RocksLogStore, open_log_database


@contextlib.contextmanager
def stopped_peer_stores(
    data_dir: Path, refused: Callable[[str], Exception]
) -> Iterator[tuple[RocksLogStore, RocksHardStateStore]]:
    """The log and hard state of the stopped peer at ``data_dir``, closed on exit.
    ``refused`` builds the error raised when the directory cannot be opened for writing
    (most often: the peer is still running)."""
    try:
        database = open_log_database(data_dir / LOG_DIR, create=False)
    except StorageError as exc:
        raise refused(
            f"cannot open {data_dir} for writing (is the peer still running?): {exc}"
        ) from None
    try:
        log, hard_state = RocksLogStore(database), RocksHardStateStore(database)
    except BaseException:
        database.release()
        raise
    try:
        yield log, hard_state
    finally:
        log.close()
        hard_state.close()
        database.release()
