"""What a ``RocksDatabase`` does while it opens: the read-only open through a shadow directory,
the options of each column family, attaching the families, and upgrading an older store.

Why apart from ``_rocksdb``: this runs once per open (and the shadow's removal once per close),
never on a read or a write; ``_rocksdb`` keeps the wrapper that every read and write goes
through. ``RocksDatabase`` inherits these methods unchanged (a base class, not a wrapper:
nothing is added to any call). The options themselves are ``_rocksdb_options``.

Where it syncs: ``_move_into_families`` writes each chunk of an upgrade as one synced batch
through ``RocksDatabase.write`` (WAL append + fdatasync), the wrapper's one fsync point.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

from rocksdict import AccessType, ColumnFamily, Options, Rdict, ReadOptions, WriteBatch

from raftlog.errors import StorageError
from raftlog.storage._records import rocks_error
from raftlog.storage._rocksdb_options import DEFAULT_FAMILY, database_options, shadow_of

MOVE_CHUNK = 50_000
"""Records moved into their column family per synced batch when an older store is upgraded."""


class RocksDatabaseOpening:
    """The opening methods of ``RocksDatabase`` (its base class); they use the database's
    state, declared here, and its ``write`` and ``_read_options``."""

    path: Path
    read_only: bool
    _families: Mapping[str, tuple[bytes, bytes]]
    _unfiltered: frozenset[str]
    _shadow: Path | None
    _db: Rdict
    _at_prefix: dict[bytes, tuple[ColumnFamily, Rdict]]
    if TYPE_CHECKING:  # defined by ``RocksDatabase``

        def write(
            self, batch: WriteBatch, sync: bool, what: str, skip_point: str = "log_sync"
        ) -> None: ...
        def _read_options(self, lo: bytes, hi: bytes) -> ReadOptions: ...

    def _options(self, family: str, create: bool) -> Options:
        """The options of ``family`` (``database_options``; without filters if unfiltered)."""
        return database_options(create, point_reads=family not in self._unfiltered)

    def _attach_families(self) -> None:
        """Take the column families' handles and views; a read-write open then moves the
        records an older store keeps in the default family into them. A read-only open of an
        older store that was never opened read-write reads them where they are; one whose
        move was cut short (a crash during the upgrade) is refused: its records are in two
        places until the peer opens it once more."""
        if not self._families:
            return
        present = set(Rdict.list_cf(str(self._shadow or self.path)))
        for name, (lo, _) in self._families.items():
            if name in present:
                self._at_prefix[lo[:1]] = (
                    self._db.get_column_family_handle(name),
                    self._db.get_column_family(name),
                )
        if not self.read_only:
            self._move_into_families()
            return
        if any(
            self._first_in_default(lo, hi)
            for lo, hi in self._families.values()
            if lo[:1] in self._at_prefix
        ):
            raise StorageError(
                f"{self.path}: its records are being moved into their column families "
                "(an upgrade that was interrupted); start the peer once to finish it"
            )

    def _first_in_default(self, lo: bytes, hi: bytes) -> bytes | None:
        iterator = self._db.iter(self._read_options(lo, hi))
        iterator.seek(lo)
        first = cast(bytes, iterator.key()) if iterator.valid() else None
        iterator.status()
        return first

    def _move_into_families(self) -> None:
        """Move the records of each family's key range out of the default family, where a
        store written before the families kept them, in chunks of ``MOVE_CHUNK``. Each chunk
        is one synced batch -- put into the family, deleted from the default -- so a crash
        between chunks leaves every record in exactly one place, and the next open goes on
        from there. The keys and values are copied verbatim (their CRCs cover the key)."""
        for name, (lo, hi) in self._families.items():
            handle = self._at_prefix[lo[:1]][0]
            while True:
                batch = WriteBatch(raw_mode=True)
                last: bytes | None = None
                for count, (key, value) in enumerate(
                    self._db.items(from_key=lo, read_opt=self._read_options(lo, hi)), 1
                ):
                    batch.put(key, value, handle)
                    last = cast(bytes, key)
                    if count == MOVE_CHUNK:
                        break
                if last is None:  # nothing (left) in the default family
                    break
                batch.delete_range(lo, last + b"\x00")  # exactly [lo, last]: what was copied
                self.write(batch, True, f"moving records into {name}")

    def _open_read_only(self) -> Rdict:
        """Open through a shadow directory; retried because a live peer may rotate its
        MANIFEST or compact files between our directory listing and RocksDB's open."""
        for attempt in range(3):
            self._shadow = shadow_of(self.path)
            try:
                families = set(Rdict.list_cf(str(self._shadow))) & set(self._families)
                return Rdict(
                    str(self._shadow),
                    self._options(DEFAULT_FAMILY, False),
                    column_families={name: self._options(name, False) for name in families},
                    access_type=AccessType.read_only(False),
                )
            except Exception as exc:
                self._remove_shadow()
                if attempt == 2 or "No such file" not in str(exc):
                    raise rocks_error(exc, f"opening {self.path}") from None
        raise AssertionError("unreachable")

    def _remove_shadow(self) -> None:
        if self._shadow is not None:
            shutil.rmtree(self._shadow, ignore_errors=True)
            self._shadow = None
