"""Shared builders for the storage tests: entries, request ids, and store factories that can
"restart" a store (reopen from disk for RocksDB, rebuild from durable state for memory)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from raftlog.entry import EntryType, LogEntry
from raftlog.storage.memory import MemoryHardStateStore, MemoryLogStore
from raftlog.storage.memory_snapshot import MemorySnapshotStore
from raftlog.storage.rocks import RocksHardStateStore, RocksLogStore, open_storage
from raftlog.storage.snapshot import FileSnapshotStore

BASE_SECONDS = 1_700_000_000


def rid(n: int, seconds: int = BASE_SECONDS) -> bytes:
    """A distinct request id per ``n`` with a chosen timestamp."""
    return seconds.to_bytes(4, "big") + n.to_bytes(8, "big")


def entry(term: int, n: int, data: bytes | None = None) -> LogEntry:
    return LogEntry(rid(n), EntryType.STATE, term, data or f"data-{n}".encode())


def checkpoint(term: int) -> LogEntry:
    return LogEntry.checkpoint(term)


def batch(term: int, first_n: int, count: int) -> list[LogEntry]:
    return [entry(term, n) for n in range(first_n, first_n + count)]


def terms(entries: Sequence[LogEntry]) -> list[int]:
    return [e.term for e in entries]


class Stores:
    """A log, hard-state and snapshot store of one kind, with ``restart()``."""

    log: MemoryLogStore | RocksLogStore
    hard_state: MemoryHardStateStore | RocksHardStateStore
    snapshots: MemorySnapshotStore | FileSnapshotStore

    def restart(self, max_entry_data_size: int | None = None) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.log.close()
        self.hard_state.close()
        self.snapshots.close()


class MemoryStores(Stores):
    def __init__(self) -> None:
        self.log = MemoryLogStore()
        self.hard_state = MemoryHardStateStore()
        self.snapshots = MemorySnapshotStore()

    def restart(self, max_entry_data_size: int | None = None) -> None:
        assert isinstance(self.log, MemoryLogStore)
        assert isinstance(self.hard_state, MemoryHardStateStore)
        assert isinstance(self.snapshots, MemorySnapshotStore)
        self.log = self.log.clone_durable()
        if max_entry_data_size is not None:
            self.log.max_entry_data_size = max_entry_data_size
        self.hard_state = self.hard_state.clone_durable()
        self.snapshots = self.snapshots.clone_durable()


class RocksStores(Stores):
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.log, self.hard_state, self.snapshots = open_storage(data_dir)

    def restart(self, max_entry_data_size: int | None = None) -> None:
        self.close()
        kwargs = {} if max_entry_data_size is None else {"max_entry_data_size": max_entry_data_size}
        self.log, self.hard_state, self.snapshots = open_storage(self.data_dir, **kwargs)
