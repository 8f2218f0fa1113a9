"""The durable stores: log and hard state in one RocksDB (via ``rocksdict``) per peer.

Where it syncs — the only places that fsync (each is one ``WriteBatch`` written with
``WriteOptions.sync = True``, so RocksDB appends it to its WAL and fdatasyncs before returning):

* ``RocksReadyStore.persist`` — a Ready's hard state + entries + truncated suffix + request-id
  keys + meta, one batch (the peer's hot path: one fsync per Ready);
* ``RocksLogStore.append``  — entries + truncated suffix + request-id keys + meta, one batch;
* ``RocksLogStore.compact`` — prefix (or whole log) removal + meta, one batch;
* ``RocksHardStateStore.save``.

A batch is atomic in RocksDB: after ``kill -9`` or power loss a reopened store holds all of a
batch or none of it. The WAL is recovered with ``kTolerateCorruptedTailRecords``: a torn record
at the very end (a write that never finished, so never acknowledged) is dropped, while a
checksum failure anywhere else refuses to open (``StorageCorruptionError``). Every value also
carries our own CRC32 over key and value (see ``_records``), checked on every read.

First/last index and the snapshot index/term live in one meta record updated in the same batch,
and are cached, so opening costs a few point reads whatever the log size.

The request-id index -- its lookups, and its pruning, which is not synced on its own -- is
``request_id_index.RocksRequestIdIndex``, the base class of ``RocksLogStore``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rocksdict import WriteBatch

from raftlog.entry import LogEntry
from raftlog.errors import EntryFormatError, StorageCorruptionError, StorageError
from raftlog.storage import _records as rec
from raftlog.storage import failpoints
from raftlog.storage._checks import (
    DEFAULT_MAX_ENTRY_DATA_SIZE,
    check_append_position,
    check_commit_floor,
    check_entry_sizes,
    check_range,
)
from raftlog.storage._rocksdb import RocksDatabase
from raftlog.storage.base import HardStateStore, LogStore, SnapshotStore
from raftlog.storage.hard_state import RocksHardStateStore
from raftlog.storage.request_id_index import RocksRequestIdIndex
from raftlog.storage.snapshot import FileSnapshotStore

__all__ = ["LOG_DIR", "SNAPSHOT_DIR", "RocksHardStateStore", "RocksLogStore"]
__all__ += ["open_log_database", "open_storage"]

LOG_DIR = "log"
SNAPSHOT_DIR = "snapshots"


def open_log_database(
    path: str | Path, *, read_only: bool = False, create: bool = True
) -> RocksDatabase:
    """The RocksDB database of a peer's log and hard state in its layout (``_records``: the
    column families, the families without bloom filters): every opener goes through here."""
    return RocksDatabase(
        path,
        read_only=read_only,
        create=create,
        families=rec.FAMILY_RANGES,
        unfiltered=rec.UNFILTERED_FAMILIES,
    )


def _nothing_in_flight() -> None:
    """The default ``before_write``: no other thread writes this store."""


class RocksLogStore(RocksRequestIdIndex):
    """``LogStore`` on RocksDB. Reads, staging and the cached bounds belong to the peer's loop
    thread; a peer's appends are *written* by its storage thread
    (``raftlog.server.storage_thread``), which sets ``before_write`` to its barrier so that
    the writes made here directly (compaction, pruning, ``append``) never interleave with a
    batch in flight."""

    def __init__(
        self, database: RocksDatabase, max_entry_data_size: int = DEFAULT_MAX_ENTRY_DATA_SIZE
    ) -> None:
        self._db = database.acquire()
        self.database = database
        self.max_entry_data_size = max_entry_data_size
        self.commit_floor = 0
        self.before_write: Callable[[], None] = _nothing_in_flight
        """Called before every write made directly by this store (see the class docstring)."""
        self._closed = False
        try:
            self._load_meta()
        except BaseException:
            self._db.release()
            raise

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        max_entry_data_size: int = DEFAULT_MAX_ENTRY_DATA_SIZE,
        read_only: bool = False,
        create: bool = True,
    ) -> RocksLogStore:
        """Open (or create) the database at ``path`` for this log store alone."""
        database = open_log_database(path, read_only=read_only, create=create)
        try:
            return cls(database, max_entry_data_size)
        finally:
            database.release()

    def _load_meta(self) -> None:
        """O(1) open: the meta record, then the first and last entry keys only."""
        value = self._db.get(rec.META_KEY, "log meta")
        first_key, last_key = self._db.bounds(rec.ENTRY_PREFIX, rec.ENTRY_END, "log entries")
        if value is None:
            if first_key is not None:
                raise StorageCorruptionError("log meta missing while entries are present")
            self._snapshot_index = self._snapshot_term = self._last_index = 0
            self._last_term = 0
            return
        self._snapshot_index, self._snapshot_term, self._last_index = rec.decode_meta(value)
        expected = (
            (None, None)
            if self._last_index == self._snapshot_index
            else (rec.entry_key(self._snapshot_index + 1), rec.entry_key(self._last_index))
        )
        if (first_key, last_key) != expected:
            found = (
                "none"
                if first_key is None
                else (f"{rec.key_index(first_key)}..{rec.key_index(last_key or first_key)}")
            )
            raise StorageCorruptionError(
                f"log holds entries {found} but its meta says "
                f"{self._snapshot_index + 1}..{self._last_index}"
            )
        self._last_term = self._snapshot_term
        if self._last_index > self._snapshot_index:
            payload = rec.entry_payload(
                self._last_index, self._db.get(rec.entry_key(self._last_index), "last entry")
            )
            self._last_term = rec.entry_term(payload)

    # -- reads ---------------------------------------------------------------------------
    @property
    def snapshot_index(self) -> int:
        """Index of the last entry the snapshot covers (0: none)."""
        return self._snapshot_index

    @property
    def snapshot_term(self) -> int:
        """Term of the entry at ``snapshot_index``."""
        return self._snapshot_term

    @property
    def first_index(self) -> int:
        """The first index still in the log (after the snapshot)."""
        return self._snapshot_index + 1

    @property
    def last_index(self) -> int:
        """The last index in the log (``snapshot_index`` when empty)."""
        return self._last_index

    def term_at(self, index: int) -> int | None:
        """The term at ``index``, or None when it is compacted away or beyond the log."""
        if index == 0:
            return 0
        if index == self._last_index:
            return self._last_term
        if index == self._snapshot_index:
            return self._snapshot_term
        if not self._snapshot_index < index < self._last_index:
            return None

        value = self._db.get(rec.entry_key(index), f"entry {index}")
        return rec.entry_term(rec.entry_payload(index, value))

    def raw_entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[bytes]:
        """Serialized entries ``[lo, hi)``, checksum-verified, for streaming without re-encoding
        (same bounds and byte limit as ``entries``)."""
        self._check_open()
        return self._read_payloads(lo, hi, max_bytes)

    def entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[LogEntry]:
        """Entries ``lo`` (inclusive) to ``hi`` (exclusive), at most ``max_bytes`` (at least
        one)."""
        payloads = self.raw_entries(lo, hi, max_bytes)
        try:
            return [LogEntry.from_bytes(payload) for payload in payloads]
        except EntryFormatError as exc:  # only if a CRC collision let a bad record through
            raise StorageCorruptionError(f"entries [{lo}, {hi}): {exc}") from exc

    def _read_payloads(self, lo: int, hi: int, max_bytes: int | None) -> list[bytes]:
        check_range(lo, hi, self.first_index, self._last_index)
        if lo >= hi:
            return []
        try:
            stored = self._db.raw_values(rec.entry_key(lo), rec.entry_key(hi))
            out, limited = rec.take_payloads(stored.values, lo, max_bytes)
            del stored  # held until here: RocksDB points into its bound keys (ValueRange)
        except StorageError:
            raise
        except Exception as exc:
            raise rec.rocks_error(exc, "reading log entries") from None
        index = lo + len(out)
        if index < hi and not limited:  # iterators end early, without an error, on a bad block
            self._db.check_iteration(rec.entry_key(index), f"entry {index}")
            raise StorageCorruptionError(f"entry {index}: record missing inside the log range")
        return out

    # -- writes --------------------------------------------------------------------------
    def set_commit_floor(self, index: int) -> None:
        """Refuse from now on any append that would drop or change entries up to ``index``
        (kept in memory only: the peer sets it again from its hard state after a restart)."""
        self.commit_floor = max(self.commit_floor, index)

    def append(self, first_index: int, entries: Sequence[LogEntry]) -> None:
        """Truncate at ``first_index`` and append ``entries``: one batch, synced on return."""
        self.before_write()
        batch = WriteBatch(raw_mode=True)
        appended = self.stage_append(batch, first_index, entries)
        self.write_synced(batch, f"append at index {first_index}")
        appended()

    def stage_append(
        self, batch: WriteBatch, first_index: int, entries: Sequence[LogEntry]
    ) -> Callable[[], None]:
        """Queue the append into ``batch`` (checked first; nothing is written) and return what
        to call once ``batch`` is written: it updates the cached bounds.

        The batch deletes the old suffix and its request-id keys, writes each entry sealed
        with its CRC, maps each non-zero request id to its index (a later entry with the same
        id takes over the mapping) and updates the meta record. ``RocksReadyStore`` adds the
        hard state to the same batch, so a Ready costs one fsync.
        """
        self._check_writable()
        check_append_position(first_index, self.first_index, self._last_index)
        check_entry_sizes(entries, self.max_entry_data_size)
        check_commit_floor(first_index, entries, self.commit_floor, self._last_index, self.term_at)
        new_last = first_index + len(entries) - 1
        new_last_term = entries[-1].term if entries else self.term_at(new_last)
        if first_index <= self._last_index:
            self._unindex_from(batch, first_index)
            batch.delete_range(rec.entry_key(first_index), rec.ENTRY_END)
        rec.put_entries(batch, first_index, entries, *self._id_families())
        rec.put_meta(batch, self._db.family, self._snapshot_index, self._snapshot_term, new_last)

        def appended() -> None:
            self._last_index = new_last
            self._last_term = new_last_term if new_last_term is not None else 0
            if failpoints.ENABLED:
                failpoints.hit("after_append")

        return appended

    def compact(self, snapshot_index: int, snapshot_term: int) -> None:
        """A snapshot covers ``[1, snapshot_index]``: drop that prefix, keeping the suffix only
        if we hold ``snapshot_index`` with ``snapshot_term`` (§12.6). One batch, synced on
        return. Request ids of compacted entries are kept (until pruned) when the suffix is
        kept, and all forgotten when the log is discarded (its entries were not the committed
        ones, so their ids may point at nothing)."""
        self._check_writable()
        self.before_write()
        if snapshot_index <= self._snapshot_index:
            return
        matching = self.term_at(snapshot_index) == snapshot_term
        if not matching and self.commit_floor > snapshot_index:
            raise StorageError(
                f"snapshot {snapshot_index}/{snapshot_term} conflicts with committed entries "
                f"up to {self.commit_floor}"
            )
        batch = WriteBatch(raw_mode=True)
        if matching:
            batch.delete_range(rec.ENTRY_PREFIX, rec.entry_key(snapshot_index + 1))
            new_last = self._last_index
        else:
            mirrors, requests = self._id_families()
            batch.delete_range(rec.ENTRY_PREFIX, rec.ENTRY_END)
            batch.delete_range(rec.REQUEST_PREFIX, rec.REQUEST_END, requests)
            batch.delete_range(rec.REQUEST_BY_INDEX_PREFIX, rec.REQUEST_BY_INDEX_END, mirrors)
            new_last = snapshot_index
        rec.put_meta(batch, self._db.family, snapshot_index, snapshot_term, new_last)
        self.write_synced(batch, f"compaction to {snapshot_index}")
        if not matching or new_last == snapshot_index:
            self._last_term = snapshot_term
        self._snapshot_index, self._snapshot_term, self._last_index = (
            snapshot_index,
            snapshot_term,
            new_last,
        )
        if failpoints.ENABLED:
            failpoints.hit("after_compact")

    def write_synced(self, batch: WriteBatch, what: str, skip_point: str = "log_sync") -> None:
        """The fsync point of the log (and of ``RocksReadyStore``): ``batch`` atomically,
        appended to RocksDB's WAL and fdatasynced before returning. ``skip_point`` names the
        test-only bug switch that leaves this fsync out (``failpoints``)."""
        self._db.write(batch, True, what, skip_point)

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"{self.database.path}: log store is closed")

    def _check_writable(self) -> None:
        self._check_open()
        self._db.check_writable()

    def close(self) -> None:
        """Release this store's use of the database (idempotent)."""
        if not self._closed:
            self._closed = True
            self._db.release()


def open_storage(
    data_dir: str | Path,
    *,
    max_entry_data_size: int = DEFAULT_MAX_ENTRY_DATA_SIZE,
    read_only: bool = False,
    create: bool = True,
) -> tuple[RocksLogStore, RocksHardStateStore, FileSnapshotStore]:
    """Open a peer's stores: ``data_dir/log`` (RocksDB) and ``data_dir/snapshots``.

    ``read_only`` opens without taking the database lock or creating anything (for tools; the
    peer may be running). Close all three stores when done.
    """
    root = Path(data_dir)
    if read_only and not root.is_dir():
        raise StorageError(f"{root}: no such data directory")
    database = open_log_database(root / LOG_DIR, read_only=read_only, create=create)
    try:
        log = RocksLogStore(database, max_entry_data_size)
        try:
            hard_state = RocksHardStateStore(database)
        except BaseException:
            log.close()
            raise
    finally:
        database.release()
    try:
        snapshots = FileSnapshotStore(root / SNAPSHOT_DIR, read_only=read_only)
    except BaseException:
        log.close()
        hard_state.close()
        raise
    return log, hard_state, snapshots


if TYPE_CHECKING:  # mypy proves the durable stores satisfy the Protocols

    def _conforms(
        log: RocksLogStore, hard_state: RocksHardStateStore, snapshots: FileSnapshotStore
    ) -> tuple[LogStore, HardStateStore, SnapshotStore]:
        return log, hard_state, snapshots
