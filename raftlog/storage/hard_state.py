"""The durable hard-state store: one checksummed record in the peer's RocksDB.

Lives in the same database as the log (``rocks.open_storage`` shares it) so a peer has one
store to open, lock and back up. ``save`` is the only sync point here (``save_applied``
rides on the next sync; ``stage`` rides on the caller's synced batch).
"""

from __future__ import annotations

from collections.abc import Callable

from rocksdict import WriteBatch

from raftlog.errors import StorageError
from raftlog.storage import _records as rec
from raftlog.storage._rocksdb import RocksDatabase
from raftlog.storage.base import HardState


class RocksHardStateStore:
    """``HardStateStore`` as one record of the peer's RocksDB (MessagePack + CRC32)."""

    def __init__(self, database: RocksDatabase) -> None:
        self._db = database.acquire()
        try:
            value = self._db.get(rec.HARD_STATE_KEY, "hard state")
            self._state = HardState() if value is None else rec.decode_hard_state(value)
        except BaseException:
            self._db.release()
            raise
        self._closed = False

    def load(self) -> HardState:
        """The last saved hard state (cached: reads cost nothing)."""
        return self._state

    @property
    def database(self) -> RocksDatabase:
        """The RocksDB this record lives in (shared with the peer's log store)."""
        return self._db

    def save(self, state: HardState) -> None:
        """Replace the hard state: one record, synced on return."""
        batch = WriteBatch(raw_mode=True)
        saved = self.stage(batch, state)
        self._db.write(batch, True, "hard state", "hard_state_sync")
        saved()

    def stage(self, batch: WriteBatch, state: HardState) -> Callable[[], None]:
        """Queue ``state`` into ``batch`` (the caller's synced write makes it durable, e.g.
        ``RocksReadyStore.persist`` with a Ready's entries); returns what to call once the
        batch is written."""
        if self._closed:
            raise StorageError(f"{self._db.path}: hard-state store is closed")
        self._db.check_writable()
        self._put(batch, state)

        def saved() -> None:
            self._state = state

        return saved

    def save_applied(self, last_applied: int) -> None:
        """Record the state machine's progress **without a sync of its own**.

        Called after every applied batch; a sync each time would double the fsyncs of a busy
        peer. The record goes to the same WAL as every synced write, so the next synced
        append or hard-state save makes it durable too. Losing it in a crash only makes the
        peer re-apply a few committed entries (commit restarts at ``last_applied``), which is
        safe. Never moves ``last_applied`` backwards."""
        if last_applied <= self._state.last_applied:
            return
        if self._closed:
            raise StorageError(f"{self._db.path}: hard-state store is closed")
        state = self._state.with_applied(last_applied)
        batch = WriteBatch(raw_mode=True)
        self._put(batch, state)
        self._db.write(batch, False, "hard state")
        self._state = state

    def _put(self, batch: WriteBatch, state: HardState) -> None:
        """Queue the record into ``batch`` (``_records.put_in_meta_family``)."""
        rec.put_in_meta_family(
            batch, self._db.family, rec.HARD_STATE_KEY, rec.encode_hard_state(state)
        )

    def close(self) -> None:
        """Release this store's hold on the shared database (idempotent)."""
        if not self._closed:
            self._closed = True
            self._db.release()
