"""How a raftlog RocksDB database is opened: its options and the read-only shadow directory.

Why apart from ``_rocksdb``: the options are the tuning of the store (memtables, WAL replay,
bloom filters, recovery mode), reviewed on their own; ``_rocksdb`` is the wrapper that every
read and write goes through.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from rocksdict import BlockBasedOptions, DBRecoveryMode, Options

DEFAULT_FAMILY = "default"
"""RocksDB's name of the column family every database has."""
WRITE_BUFFER_SIZE = 4 * 1024 * 1024
BLOOM_BITS_PER_KEY = 10
"""~1% false positives: a miss costs a filter probe, not a search."""
MEMTABLE_BLOOM_RATIO = 0.1
"""Share of the memtable's size given to its whole-key bloom filter."""


def database_options(create: bool, *, point_reads: bool = True) -> Options:
    """The options of every raftlog database and of each of its column families (``create``:
    create the database when it is missing).

    ``point_reads=False`` for a family read only in ranges and by keys it holds (the log's
    entries, the by-index mirrors): a bloom filter never saves such a read a search, and it
    costs ~1.25 bytes of memory per key for as long as its table file is open -- at 10 M
    entries ~25 MiB for those two families (docs/performance.md §3)."""
    options = Options(raw_mode=True)
    options.create_if_missing(create)
    options.set_paranoid_checks(True)
    # A torn record at the end of the WAL is a write that never completed (so was never
    # acknowledged): drop it. A bad record anywhere else is corruption: refuse to open.
    options.set_wal_recovery_mode(DBRecoveryMode.tolerate_corrupted_tail_records())
    options.set_keep_log_file_num(3)
    # Reopening after a crash replays the WAL of every unflushed memtable. RocksDB's 64 MiB
    # default would be ~400k log records, seconds of replay; 4 MiB memtables (at most two
    # live) keep restart time independent of log size at the cost of more, smaller flushes.
    options.set_write_buffer_size(WRITE_BUFFER_SIZE)
    options.set_max_write_buffer_number(2)
    options.set_max_total_wal_size(2 * WRITE_BUFFER_SIZE)
    # Bloom filters, in the table files and the memtable: the leader looks up every new
    # request id to prove it is new (docs/protocol.md §12.7), a read that almost always
    # misses. Without filters a miss searched the memtable and every level-0 file's index:
    # ~8 us of CPU, 7% of a busy leader's loop; with them ~0.9 us (docs/performance.md).
    if point_reads:
        table = BlockBasedOptions()
        table.set_bloom_filter(BLOOM_BITS_PER_KEY, False)
        options.set_block_based_table_factory(table)
        options.set_memtable_prefix_bloom_ratio(MEMTABLE_BLOOM_RATIO)
        options.set_memtable_whole_key_filtering(True)
    # A log store written before its column families (``_records``) gets them at its first
    # read-write open, and its records are moved (``RocksDatabase._move_into_families``).
    options.create_missing_column_families(True)
    return options


def shadow_of(path: Path) -> Path:
    """A temporary directory of symlinks to the database files, for read-only opens.

    ``rocksdict`` rewrites its ``rocksdict-config.json`` and RocksDB may write an info ``LOG``
    even when opening read-only; pointing them at a private directory keeps the real one
    untouched (and readable on a read-only file system). Only immutable or append-only files
    are linked; RocksDB opens them by name and never writes to them in read-only mode.
    """
    shadow = Path(tempfile.mkdtemp(prefix="raftlog-ro-"))
    try:
        for entry in os.scandir(path):
            if (
                entry.is_file()
                and entry.name not in _NOT_SHARED
                and not entry.name.startswith("LOG")
            ):
                os.symlink(os.path.abspath(entry.path), shadow / entry.name)
    except OSError:
        shutil.rmtree(shadow, ignore_errors=True)
        raise
    return shadow


_NOT_SHARED = frozenset({"LOCK", "rocksdict-config.json"})
