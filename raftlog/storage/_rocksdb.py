"""A thin, typed wrapper over one ``rocksdict.Rdict``: opening, errors, syncs, reference count.

Every RocksDB call goes through here so that (1) its exceptions become ``StorageError`` /
``StorageCorruptionError`` in exactly one place, and (2) the synced write — the fsync point of
the whole durable store — is one method, ``write(batch, sync=True)``.

What it does only while opening (the read-only shadow, the column families' options and
handles, moving an older store's records into them) is its base class, ``_rocksdb_open``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import TypeVar, cast

from rocksdict import (
    AccessType,
    ColumnFamily,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from raftlog.errors import StorageError
from raftlog.storage import failpoints
from raftlog.storage._records import rocks_error
from raftlog.storage._rocksdb_open import RocksDatabaseOpening
from raftlog.storage._rocksdb_options import DEFAULT_FAMILY
from raftlog.storage.durable_dirs import make_dirs

_T = TypeVar("_T")



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


class RocksDatabase(RocksDatabaseOpening):
    """One RocksDB database, shared by the stores of a peer and closed with the last of them."""

    def __init__(
        self,
        path: str | Path,
        *,
        read_only: bool = False,
        create: bool = True,
        families: Mapping[str, tuple[bytes, bytes]] | None = None,
        unfiltered: Collection[str] = (),
    ) -> None:
        """``families``: column families by name, each holding one key range ``[lo, hi)``
        whose keys share the one-byte prefix ``lo``; reads of a key go to its family, and
        write batches name the family (``family``). The log store's layout
        (``_records.FAMILY_RANGES``); other databases (the topic index) have none.
        ``unfiltered``: the families (``"default"`` among them) never read by a key they may
        not hold, written without bloom filters (``database_options``)."""
        self.path = Path(path)
        self.read_only = read_only
        self._families: Mapping[str, tuple[bytes, bytes]] = families or {}
        self._unfiltered = frozenset(unfiltered)
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
                    str(self.path),
                    self._options(DEFAULT_FAMILY, create),
                    column_families={name: self._options(name, create) for name in self._families},
                    access_type=AccessType.read_write(),
                )
            except Exception as exc:
                raise rocks_error(exc, f"opening {self.path}") from None
        self._no_sync = WriteOptions()
        self._users = 1
        self._closed = False
        self._at_prefix: dict[bytes, tuple[ColumnFamily, Rdict]] = {}
        """The family holding each prefix's keys: its handle for write batches, its view for
        reads (absent: the default family)."""
        try:
            self._attach_families()
        except BaseException:
            self._close_db()
            raise

    def family(self, name: str) -> ColumnFamily | None:
        """The handle of a column family for write batches; None where the family does not
        exist (a read-only view of an older store, or a database without families)."""
        bounds = self._families.get(name)
        return None if bounds is None else self.family_of(bounds[0])

    def family_of(self, key: bytes) -> ColumnFamily | None:
        """The handle of the family that holds ``key`` (None: the default family), for
        copying records whose kind is not known in advance (backups)."""
        found = self._at_prefix.get(key[:1])
        return None if found is None else found[0]

    def _reader(self, key: bytes) -> Rdict:
        found = self._at_prefix.get(key[:1])
        return self._db if found is None else found[1]

    def _all_families(self) -> tuple[Rdict, ...]:
        """The default family's view and every other family's."""
        return (self._db, *(view for _, view in self._at_prefix.values()))

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
            self._close_db()

    def _close_db(self) -> None:
        self._closed = True
        self._at_prefix.clear()  # RocksDB closes only when nothing holds a family
        try:
            self._db.close()
        except Exception as exc:
            raise rocks_error(exc, f"closing {self.path}") from None
        finally:
            self._remove_shadow()

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
            return cast("bytes | None", self._reader(key).get(key))
        except Exception as exc:
            raise rocks_error(exc, f"reading {what}") from None

    def get_many(self, keys: Sequence[bytes], what: str) -> list[bytes | None]:
        """The value of each of ``keys`` or None, in order: one RocksDB ``MultiGet``. The
        keys share one prefix (one column family)."""
        self.check_open()
        if not keys:
            return []
        wanted: list[str | int | float | bytes | bool] = list(keys)  # the stub's key type
        try:
            return cast("list[bytes | None]", self._reader(keys[0]).get(wanted))
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
        return self._guarded(self._reader(lo).values, lo, hi, what)

    def raw_values(self, lo: bytes, hi: bytes) -> ValueRange:
        """``values`` without the per-item exception wrapper, for hot loops that convert
        RocksDB exceptions themselves (with ``rocks_error``) around the whole iteration.
        The caller keeps the returned range referenced while it iterates ``.values``."""
        self.check_open()
        options = self._read_options(lo, hi)
        values = cast(Iterator[bytes], self._reader(lo).values(from_key=lo, read_opt=options))
        return ValueRange(values, options, (lo, hi))

    def items(self, lo: bytes, hi: bytes, what: str) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` pairs in ``[lo, hi)`` (same early-stop caveat as ``values``)."""
        self.check_open()
        return self._guarded(
            cast(Callable[..., Iterator[tuple[bytes, bytes]]], self._reader(lo).items),
            lo,
            hi,
            what,
        )

    def items_backwards(self, lo: bytes, hi: bytes, what: str) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` pairs in ``[lo, hi)``, the last first (one iterator: for finding
        the last few keys of a range that match a condition)."""
        self.check_open()
        try:
            iterator = self._reader(lo).iter(self._read_options(lo, hi))
            iterator.seek_for_prev(hi)
            while iterator.valid():
                key = cast(bytes, iterator.key())
                if key < hi:
                    yield key, cast(bytes, iterator.value())
                iterator.prev()
            iterator.status()
        except Exception as exc:
            raise rocks_error(exc, f"reading {what}") from None

    def _guarded(
        self, method: Callable[..., Iterator[_T]], lo: bytes, hi: bytes, what: str
    ) -> Iterator[_T]:
        try:
            yield from method(from_key=lo, read_opt=self._read_options(lo, hi))
        except Exception as exc:
            raise rocks_error(exc, f"reading {what}") from None

    def scan_all(self, what: str) -> Iterator[tuple[bytes, bytes]]:
        """Every record of the store in key order, whichever family holds it (the families
        hold disjoint key ranges, the default family's keys the gaps between them), with
        ``scan``'s strict end check."""
        ranges = sorted(self._families.values())
        if not ranges:
            yield from self._scan(self._db, b"", b"\xff" * 16, what)
            return
        default = [(b"", ranges[0][0])]
        default += [(hi, lo) for (_, hi), (lo, _) in pairwise(ranges)]
        default.append((ranges[-1][1], b"\xff" * 16))
        for (lo, hi), family in zip(default, [*ranges, None], strict=True):
            yield from self._scan(self._db, lo, hi, what)
            if family is not None:
                yield from self.scan(*family, what)

    def scan(self, lo: bytes, hi: bytes, what: str) -> Iterator[tuple[bytes, bytes]]:
        """Like ``items`` but strict: checks the iterator status at the end, so a bad block
        raises ``StorageCorruptionError`` instead of silently ending the scan (slower: for
        verification, not for the hot path). ``[lo, hi)`` lies within one family."""
        return self._scan(self._reader(lo), lo, hi, what)

    def _scan(self, db: Rdict, lo: bytes, hi: bytes, what: str) -> Iterator[tuple[bytes, bytes]]:
        self.check_open()
        try:
            iterator = db.iter(self._read_options(lo, hi))
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
            iterator = self._reader(lo).iter(self._read_options(lo, hi))
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
            for db in self._all_families():
                db.compact_range(None, None)
        except Exception as exc:
            raise rocks_error(exc, f"compacting {self.path}") from None

    def property_int(self, name: str) -> int | None:
        """A RocksDB integer property (e.g. sizes for the metrics) summed over the column
        families, None if unknown."""
        self.check_open()
        try:
            values = [db.property_int_value(name) for db in self._all_families()]
        except Exception as exc:
            raise rocks_error(exc, f"reading property {name}") from None
        known = [value for value in values if value is not None]
        return sum(known) if known else None

    def raw_put_for_tests(self, key: bytes, value: bytes) -> None:
        """Overwrite a stored value verbatim (synced), bypassing every check: corruption tests
        use it to plant a bad record inside an otherwise healthy database."""
        self.check_writable()
        self._reader(key).put(key, value, self._no_sync)
        self._db.flush_wal(True)
