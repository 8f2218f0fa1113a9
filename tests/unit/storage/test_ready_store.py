"""``ReadyStore``: a Ready's hard state and entries in one synced write, atomically."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from storage_helpers import batch

from raftlog.errors import StorageError
from raftlog.storage import failpoints
from raftlog.storage._rocksdb import RocksDatabase
from raftlog.storage.base import HardState
from raftlog.storage.memory import MemoryHardStateStore, MemoryLogStore
from raftlog.storage.ready_store import MemoryReadyStore, RocksReadyStore
from raftlog.storage.rocks import RocksLogStore, open_storage


@pytest.fixture
def failpoint_spec() -> Iterator[None]:
    yield
    failpoints.configure(None)


def _count_synced_writes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    synced: list[str] = []
    real_write = RocksDatabase.write

    def counting(
        self: RocksDatabase, batch_: object, sync: bool, what: str, skip: str = "log_sync"
    ) -> None:
        if sync:
            synced.append(what)
        real_write(self, batch_, sync, what, skip)  # type: ignore[arg-type]

    monkeypatch.setattr(RocksDatabase, "write", counting)
    return synced


def test_hard_state_and_entries_cost_one_synced_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, hard_state, snapshots = open_storage(tmp_path)
    store = RocksReadyStore(log, hard_state)
    synced = _count_synced_writes(monkeypatch)
    store.persist(HardState(current_term=3, voted_for="n2"), 1, batch(3, 1, 10))
    store.persist(HardState(current_term=4), 11, batch(4, 11, 5))
    store.persist(None, 8, batch(4, 100, 2))  # a truncation alone
    store.persist(HardState(current_term=5, voted_for="n1"), 0, None)  # a vote alone
    store.persist(None, 0, None)  # nothing to write: no fsync
    assert len(synced) == 4
    assert (log.last_index, log.term_at(9), hard_state.load().current_term) == (9, 4, 5)
    for store_ in (log, hard_state, snapshots):
        store_.close()
    log, hard_state, snapshots = open_storage(tmp_path)
    assert hard_state.load() == HardState(current_term=5, voted_for="n1")
    assert (log.last_index, log.term_at(7), log.term_at(9)) == (9, 3, 4)
    assert [e.data for e in log.entries(8, 10)] == [b"data-100", b"data-101"]
    for store_ in (log, hard_state, snapshots):
        store_.close()


def test_a_failed_persist_writes_neither(tmp_path: Path, failpoint_spec: None) -> None:
    log, hard_state, snapshots = open_storage(tmp_path)
    store = RocksReadyStore(log, hard_state)
    store.persist(HardState(current_term=1), 1, batch(1, 1, 3))
    failpoints.configure("before_sync=error")
    with pytest.raises(StorageError):
        store.persist(HardState(current_term=2, voted_for="n3"), 4, batch(2, 4, 3))
    failpoints.configure(None)
    assert (log.last_index, hard_state.load().current_term) == (3, 1)
    for store_ in (log, hard_state, snapshots):
        store_.close()
    log, hard_state, snapshots = open_storage(tmp_path)
    assert (log.last_index, hard_state.load().current_term) == (3, 1)
    for store_ in (log, hard_state, snapshots):
        store_.close()


def test_a_refused_append_writes_no_hard_state_either(tmp_path: Path) -> None:
    log, hard_state, snapshots = open_storage(tmp_path)
    store = RocksReadyStore(log, hard_state)
    store.persist(HardState(current_term=1), 1, batch(1, 1, 3))
    with pytest.raises(IndexError):  # a gap: checked before anything is queued
        store.persist(HardState(current_term=9), 10, batch(1, 10, 1))
    assert hard_state.load().current_term == 1
    for store_ in (log, hard_state, snapshots):
        store_.close()


def test_stores_of_two_databases_are_refused(tmp_path: Path) -> None:
    log, hard_state, snapshots = open_storage(tmp_path / "a")
    other = RocksLogStore.open(tmp_path / "b")
    with pytest.raises(StorageError, match="share one database"):
        RocksReadyStore(other, hard_state)
    for store_ in (log, hard_state, snapshots, other):
        store_.close()


def test_memory_ready_store_writes_both() -> None:
    log, hard_state = MemoryLogStore(), MemoryHardStateStore()
    MemoryReadyStore(log, hard_state).persist(HardState(current_term=2), 1, batch(2, 1, 2))
    assert (log.last_index, hard_state.load().current_term) == (2, 2)
