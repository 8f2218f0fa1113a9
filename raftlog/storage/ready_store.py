"""``ReadyStore``: a Ready's hard state and log append written as one synced batch.

Why: the Ready contract (``raftlog.consensus.ready``) persists the hard state (step 1) and the
entries (step 3) before anything that promises durability is sent. Two synced writes cost two
fsyncs; the peer's hard state and log share one RocksDB, so one ``WriteBatch`` holds both and
RocksDB's WAL makes it atomic and durable with a single fdatasync.

Where it syncs: ``RocksReadyStore.persist`` -> ``RocksLogStore.write_synced`` (one batch).
``MemoryReadyStore`` (simulator, unit tests) writes the two in-memory stores back to back;
its crash points lie between Ready steps, never inside ``persist``, so the pair is atomic there
too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rocksdict import WriteBatch

from raftlog.entry import LogEntry
from raftlog.errors import StorageError
from raftlog.storage.base import HardState, ReadyStore
from raftlog.storage.hard_state import RocksHardStateStore
from raftlog.storage.memory import MemoryHardStateStore, MemoryLogStore
from raftlog.storage.rocks import RocksLogStore


class RocksReadyStore:
    """``ReadyStore`` over a peer's log and hard-state stores (one RocksDB)."""

    def __init__(self, log: RocksLogStore, hard_state: RocksHardStateStore) -> None:
        if log.database is not hard_state.database:
            raise StorageError("the log and the hard state must share one database")
        self._log = log
        self._hard_state = hard_state

    def persist(
        self, hard_state: HardState | None, first_index: int, entries: Sequence[LogEntry] | None
    ) -> None:
        """One WriteBatch: the hard state and the append; synced on return."""
        batch = WriteBatch(raw_mode=True)
        done: list[Callable[[], None]] = []
        if entries is not None:
            done.append(self._log.stage_append(batch, first_index, entries))
        if hard_state is not None:
            done.append(self._hard_state.stage(batch, hard_state))
        if not done:
            return
        if entries is None:  # a vote or a new term alone
            self._log.write_synced(batch, "ready", "hard_state_sync")
        else:
            self._log.write_synced(batch, f"ready at {first_index}")
        for written in done:
            written()


class MemoryReadyStore:
    """``ReadyStore`` over the in-memory stores (each write synced when they sync on write)."""

    def __init__(self, log: MemoryLogStore, hard_state: MemoryHardStateStore) -> None:
        self._log = log
        self._hard_state = hard_state

    def persist(
        self, hard_state: HardState | None, first_index: int, entries: Sequence[LogEntry] | None
    ) -> None:
        """Hard state, then the append (see the module docstring for why this is atomic)."""
        if hard_state is not None:
            self._hard_state.save(hard_state)
        if entries is not None:
            self._log.append(first_index, entries)


def _conforms(rocks: RocksReadyStore, memory: MemoryReadyStore) -> tuple[ReadyStore, ReadyStore]:
    """mypy proves both satisfy the Protocol."""
    return rocks, memory
