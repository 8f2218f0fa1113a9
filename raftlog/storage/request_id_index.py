"""The request-id index of the RocksDB log store: lookups, pruning, removal on truncation.

Why apart from ``rocks``: the index (``r`` + request id -> index, and its by-index mirror
``x`` + index -> request id; ``_records``) is the at-most-once guarantee of docs/protocol.md
§12.7, a concern of its own beside the log's entries and bounds. ``RocksLogStore`` inherits
these methods unchanged (a base class, not a wrapper: a lookup or an append makes the same
calls as before), and its appends and compactions use ``_unindex_from`` and
``_id_families`` inside their own batches.

Where it writes: ``_unindex_from`` only queues into the caller's batch (synced by
``RocksLogStore.append`` / ``RocksReadyStore.persist``). Pruning is explicit
(``prune_request_ids`` / ``prune_expired_request_ids``): compaction keeps the ids of compacted
entries so that idempotency outlives the log prefix (docs/protocol.md §12.7). Prunes are not
synced on their own: a prune lost in a crash only keeps some ids a little longer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rocksdict import ColumnFamily, WriteBatch

from raftlog.ids import is_expired
from raftlog.storage import _records as rec
from raftlog.storage._rocksdb import RocksDatabase


class RocksRequestIdIndex:
    """The request-id index methods of ``RocksLogStore`` (its base class); they use the
    store's database, write barrier and open/writable checks, declared here."""

    _db: RocksDatabase
    before_write: Callable[[], None]
    if TYPE_CHECKING:  # defined by ``RocksLogStore``

        def _check_open(self) -> None: ...
        def _check_writable(self) -> None: ...

    def index_of_request(self, request_id: bytes) -> int | None:
        """The index a request id was appended at, or None (the at-most-once lookup)."""
        return self.indexes_of_requests((request_id,))[0]

    def indexes_of_requests(self, request_ids: Sequence[bytes]) -> list[int | None]:
        """``index_of_request`` of each id, in order, with one RocksDB ``MultiGet`` (the
        leader looks up a whole proposal batch at once, issue #28)."""
        self._check_open()
        keys = [rec.REQUEST_PREFIX + request_id for request_id in request_ids]
        values = self._db.get_many(keys, "request-id index")
        return [
            None
            if value is None
            else int.from_bytes(rec.unseal(key, value, f"request id {request_id.hex()}"), "big")
            for request_id, key, value in zip(request_ids, keys, values, strict=True)
        ]

    def oldest_request_index(self) -> int | None:
        """Lowest index still in the request-id index (docs/protocol.md §12.7 prune index + 1)."""
        first, _ = self._db.bounds(rec.REQUEST_BY_INDEX_PREFIX, rec.REQUEST_BY_INDEX_END, "ids")
        return None if first is None else rec.key_index(first)

    def prune_request_ids(self, before_index: int) -> int:
        """Forget the request ids of entries below ``before_index``; returns how many.

        Walks the by-index keys from the oldest, so the cost is the number pruned."""
        self._check_writable()
        return self._prune(lambda index, _rid: index < before_index, before_index)

    def prune_expired_request_ids(self, now_ms: int, ttl_ms: int | None) -> int:
        """Forget expired ids from the oldest entry up to the first fresh one (§12.7)."""
        self._check_writable()
        return self._prune(lambda _index, rid: is_expired(rid, now_ms, ttl_ms), None)

    def _prune(self, expired: Callable[[int, bytes], bool], before_index: int | None) -> int:
        end = rec.REQUEST_BY_INDEX_END
        if before_index is not None:
            end = rec.request_by_index_key(max(before_index, 0))
        # The peer's housekeeping asks every second; usually the oldest id is still fresh.
        # Only a prune that will write waits for the storage thread (``before_write``).
        for key, value in self._db.items(rec.REQUEST_BY_INDEX_PREFIX, end, "request ids"):
            index = rec.key_index(key)
            if not expired(index, rec.unseal(key, value, f"request id of entry {index}")):
                return 0
            break
        else:
            return 0
        self.before_write()
        batch = WriteBatch(raw_mode=True)
        mirrors, requests = self._id_families()
        pruned = 0
        first = last = 0
        for key, value in self._db.items(rec.REQUEST_BY_INDEX_PREFIX, end, "request ids"):
            index = rec.key_index(key)
            request_id = rec.unseal(key, value, f"request id of entry {index}")
            if not expired(index, request_id):
                break
            if self.index_of_request(request_id) == index:  # a later duplicate keeps its mapping
                batch.delete(rec.request_key(request_id), requests)
            if not pruned:
                first = index
            last = index
            pruned += 1
        if pruned:
            # The by-index keys just visited are exactly [first, last]: one range tombstone.
            # A point tombstone per key piled up at the front of this prefix, and every later
            # seek there (the next prune, oldest_request_index) walked over all of them: loop
            # stalls of up to 1.3 s with compaction on (issue #12, docs/reliability.md).
            batch.delete_range(
                rec.request_by_index_key(first), rec.request_by_index_key(last + 1), mirrors
            )
            self._db.write(batch, False, "request-id prune")
        return pruned

    def _unindex_from(self, batch: WriteBatch, first_index: int) -> None:
        """Queue removal of the request ids of every entry at or after ``first_index``."""
        start = rec.request_by_index_key(first_index)
        mirrors, requests = self._id_families()
        for key, value in self._db.items(start, rec.REQUEST_BY_INDEX_END, "request ids"):
            index = rec.key_index(key)
            request_id = rec.unseal(key, value, f"request id of entry {index}")
            batch.delete(key, mirrors)
            if self.index_of_request(request_id) == index:  # a later duplicate keeps its mapping
                batch.delete(rec.request_key(request_id), requests)

    def _id_families(self) -> tuple[ColumnFamily | None, ColumnFamily | None]:
        """The column families of the by-index mirrors and of the request ids, asked of the
        database each time: a store that kept the handles would keep RocksDB from closing."""
        return self._db.family(rec.MIRROR_FAMILY), self._db.family(rec.REQUEST_FAMILY)
