"""A thin, typed wrapper over one ``rocksdict.Rdict``: opening, errors, syncs, reference count.

Every RocksDB call goes through here so that (1) its exceptions become ``StorageError`` /
``StorageCorruptionError`` in exactly one place, and (2) the synced write — the fsync point of
the whole durable store — is one method, ``write(batch, sync=True)``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar, cast

from rocksdict import (
    AccessType,
    BlockBasedOptions,
    DBRecoveryMode,
    Options,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from raftlog.errors import StorageError
from raftlog.storage import failpoints
from raftlog.storage._records import rocks_error
from raftlog.storage.durable_dirs import make_dirs

_T = TypeVar("_T")
WRITE_BUFFER_SIZE = 4 * 1024 * 1024
BLOOM_BITS_PER_KEY = 10
"""~1% false positives: a miss costs a filter probe, not a search."""
MEMTABLE_BLOOM_RATIO = 0.1
"""Share of the memtable's size given to its whole-key bloom filter."""


def _options(create: bool) -> Options:
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
    table = BlockBasedOptions()
    table.set_bloom_filter(BLOOM_BITS_PER_KEY, False)
    options.set_block_based_table_factory(table)
    options.set_memtable_prefix_bloom_ratio(MEMTABLE_BLOOM_RATIO)
    options.set_memtable_whole_key_filtering(True)
    return options


def _shadow_of(path: Path) -> Path:
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


class ValueRange:
    """The values of a key range, with the ``ReadOptions`` and bound keys they were read
    with: RocksDB keeps pointers to the bound bytes, and an iterator that outlives them
    compares against freed memory (seen: a range read that ended early once the key objects
    were collected). Keep this object referenced while iterating ``values``, the bare
    rocksdict iterator (no Python-level ``__next__`` per item on the hot path: a wrapper's
    took 12% of a leader's CPU while it streamed RequestEntries)."""

    __slots__ = ("_bounds", "_options", "values")

    def __init__(
        self, values: Iterator[bytes], options: ReadOptions, bounds: tuple[bytes, bytes]
    ) -> None:
        self.values = values
        self._options = options
        self._bounds = bounds


class RocksDatabase:
    """One RocksDB database, shared by the stores of a peer and closed with the last of them."""

    def __init__(self, path: str | Path, *, read_only: bool = False, create: bool = True) -> None:
        self.path = Path(path)
        self.read_only = read_only
        if not (self.path / "CURRENT").is_file():
            if read_only or not create:
                raise StorageError(f"{self.path}: no raftlog store here")
            make_dirs(self.path)
        self._shadow: Path | None = None
        if read_only:
            self._db = self._open_read_only()
        else:
            try:
                self._db = Rdict(
                    str(self.path), _options(create), access_type=AccessType.read_write()
                )
            except Exception as exc:
                raise rocks_error(exc, f"opening {self.path}") from None
        self._no_sync = WriteOptions()
        self._users = 1
        self._closed = False

    def _open_read_only(self) -> Rdict:
        """Open through a shadow directory; retried because a live peer may rotate its
        MANIFEST or compact files between our directory listing and RocksDB's open."""
        for attempt in range(3):
            self._shadow = _shadow_of(self.path)
            try:
                return Rdict(
                    str(self._shadow), _options(False), access_type=AccessType.read_only(False)
                )
            except Exception as exc:
                self._remove_shadow()
                if attempt == 2 or "No such file" not in str(exc):
                    raise rocks_error(exc, f"opening {self.path}") from None
        raise AssertionError("unreachable")

    def acquire(self) -> RocksDatabase:
        """One more user of the shared database (the log and hard-state stores share it)."""
        self.check_open()
        self._users += 1
        return self

    def release(self) -> None:
        """Drop one user; the database closes when the last one (creator included) is gone."""
        if self._closed:
            return
        self._users -= 1
        if self._users == 0:
            self._closed = True
            try:
                self._db.close()
            except Exception as exc:
                raise rocks_error(exc, f"closing {self.path}") from None
            finally:
                self._remove_shadow()

    def _remove_shadow(self) -> None:
        if self._shadow is not None:
            shutil.rmtree(self._shadow, ignore_errors=True)
            self._shadow = None

    def check_open(self) -> None:
        """Refuse use after close with a clear error instead of a crash inside RocksDB."""
        if self._closed:
            raise StorageError(f"{self.path}: store is closed")

    def check_writable(self) -> None:
        """Refuse writes to a store opened read-only (tools inspecting a stopped peer)."""
        self.check_open()
        if self.read_only:
            raise StorageError(f"{self.path}: store was opened read-only")

    def get(self, key: bytes, what: str) -> bytes | None:
        """The value of ``key`` or None; a RocksDB error becomes a ``StorageError`` naming
        ``what``."""
        self.check_open()
        try:
            return cast("bytes | None", self._db.get(key))
        except Exception as exc:
            raise rocks_error(exc, f"reading {what}") from None

    def get_many(self, keys: Sequence[bytes], what: str) -> list[bytes | None]:
        """The value of each of ``keys`` or None, in order: one RocksDB ``MultiGet``."""
        self.check_open()
        wanted: list[str | int | float | bytes | bool] = list(keys)  # the stub's key type
        try:
            return cast("list[bytes | None]", self._db.get(wanted))
        except Exception as exc:
            raise rocks_error(exc, f"reading {what}") from None

    def write(
        self, batch: WriteBatch, sync: bool, what: str, skip_point: str = "log_sync"
    ) -> None:
        """Apply ``batch`` atomically. With ``sync`` this is an fsync point: RocksDB appends the
        batch to its WAL and fdatasyncs it before returning (failpoint ``before_sync`` first).
        Test-only bug switches (``failpoints``): ``sync=skip`` leaves the WAL out of every
        write; ``<skip_point>=skip`` (``log_sync``, ``hard_state_sync``) writes the WAL but
        leaves this write's fsync out, which only a power cut can tell."""
        self.check_writable()
        options = self._no_sync
        if failpoints.ENABLED:
            if sync:
                failpoints.hit("before_sync")
                if failpoints.skipped(skip_point):
                    sync = False
            if failpoints.skipped("sync"):  # test-only bug switch: every write memory-only
                options = WriteOptions()
                options.disable_wal = True  # type: ignore[method-assign, assignment]  # stub: a property
                sync = False
        try:
            self._db.write(batch, options)
            if sync:
                # The fsync point. Not ``WriteOptions.sync``: rocksdict runs ``write`` with the
                # GIL held, so every other thread of the peer (the storage thread's loop, the
                # HTTP and Kafka listeners, the connection monitor) stood still for the whole
                # fdatasync; ``flush_wal`` releases the GIL while it syncs (issue #28). Same
                # durability: the batch is in the WAL file when ``write`` returns (no manual
                # WAL flush), and ``FlushWAL(sync)`` fdatasyncs every WAL file up to it (and
                # the WAL directory when a new file was started) before it returns.
                self._db.flush_wal(True)
        except Exception as exc:
            raise rocks_error(exc, f"writing {what}") from None

    def _read_options(self, lo: bytes, hi: bytes) -> ReadOptions:
        options = ReadOptions()
        options.set_iterate_lower_bound(lo)
        options.set_iterate_upper_bound(hi)
        return options

    def values(self, lo: bytes, hi: bytes, what: str) -> Iterator[bytes]:
        """Values of keys in ``[lo, hi)``. Note: like every RocksDB iterator it may *stop early*
        on a bad block instead of raising; callers count what they got (``check_iteration``)."""
        self.check_open()
        return self._guarded(self._db.values, lo, hi, what)

    def raw_values(self, lo: bytes, hi: bytes) -> ValueRange:
        """``values`` without the per-item exception wrapper, for hot loops that convert
        RocksDB exceptions themselves (with ``rocks_error``) around the whole iteration.
        The caller keeps the returned range referenced while it iterates ``.values``."""
        self.check_open()
        options = self._read_options(lo, hi)
        values = cast(Iterator[bytes], self._db.values(from_key=lo, read_opt=options))
        return ValueRange(values, options, (lo, hi))

    def items(self, lo: bytes, hi: bytes, what: str) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` pairs in ``[lo, hi)`` (same early-stop caveat as ``values``)."""
        self.check_open()
        return self._guarded(
            cast(Callable[..., Iterator[tuple[bytes, bytes]]], self._db.items), lo, hi, what
        )

    def _guarded(
        self, method: Callable[..., Iterator[_T]], lo: bytes, hi: bytes, what: str
    ) -> Iterator[_T]:
        try:
            yield from method(from_key=lo, read_opt=self._read_options(lo, hi))
        except Exception as exc:
            raise rocks_error(exc, f"reading {what}") from None

    def scan(self, lo: bytes, hi: bytes, what: str) -> Iterator[tuple[bytes, bytes]]:
        """Like ``items`` but strict: checks the iterator status at the end, so a bad block
        raises ``StorageCorruptionError`` instead of silently ending the scan (slower: for
        verification, not for the hot path)."""
        self.check_open()
        try:
            iterator = self._db.iter(self._read_options(lo, hi))
            iterator.seek(lo)
            while iterator.valid():
                yield cast(bytes, iterator.key()), cast(bytes, iterator.value())
                iterator.next()
            iterator.status()
        except Exception as exc:
            raise rocks_error(exc, f"reading {what}") from None

    def check_iteration(self, key: bytes, what: str) -> None:
        """After an iterator ended early: a point read of the next key surfaces the RocksDB
        error (e.g. ``Corruption: block checksum mismatch``) that the iterator swallowed."""
        self.get(key, what)

    def bounds(self, lo: bytes, hi: bytes, what: str) -> tuple[bytes | None, bytes | None]:
        """First and last key in ``[lo, hi)`` (two seeks, no scan). Explicit seeks rather than
        ``seek_to_first``, which ignores the lower bound."""
        self.check_open()
        try:
            iterator = self._db.iter(self._read_options(lo, hi))
            iterator.seek(lo)
            if not iterator.valid():
                iterator.status()
                return None, None
            first = cast(bytes, iterator.key())
            iterator.seek_for_prev(hi)
            while iterator.valid() and cast(bytes, iterator.key()) >= hi:
                iterator.prev()
            iterator.status()
            return first, cast(bytes, iterator.key()) if iterator.valid() else first
        except Exception as exc:
            raise rocks_error(exc, f"reading {what}") from None

    def compact_all(self) -> None:
        """Compact the whole database now, in the caller's thread. For tools that write a
        store in bulk and close it (``bench/prefill.py``): without this, the compactions that
        bulk load owes run when the next process opens the store, competing with it for CPU
        and disk, which a peer that wrote the same log over hours never pays at once."""
        self.check_writable()
        try:
            self._db.compact_range(None, None)
        except Exception as exc:
            raise rocks_error(exc, f"compacting {self.path}") from None

    def property_int(self, name: str) -> int | None:
        """A RocksDB integer property (e.g. sizes for the metrics), None if unknown."""
        self.check_open()
        try:
            return self._db.property_int_value(name)
        except Exception as exc:
            raise rocks_error(exc, f"reading property {name}") from None

    def raw_put_for_tests(self, key: bytes, value: bytes) -> None:
        """Overwrite a stored value verbatim (synced), bypassing every check: corruption tests
        use it to plant a bad record inside an otherwise healthy database."""
        self.check_writable()
        self._db.put(key, value, self._no_sync)
        self._db.flush_wal(True)
