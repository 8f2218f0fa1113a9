"""Crash modelling of the in-memory stores: what ``crash()`` and ``clone_durable()`` keep."""

from __future__ import annotations

from storage_helpers import batch, rid, terms

from raftlog.storage.base import HardState, SnapshotMeta
from raftlog.storage.memory import MemoryHardStateStore, MemoryLogStore
from raftlog.storage.memory_snapshot import MemorySnapshotStore


def test_synced_mode_loses_nothing_and_counts_one_sync_per_call() -> None:
    log = MemoryLogStore()
    log.append(1, batch(1, 1, 3))
    log.append(4, batch(1, 4, 2))
    log.compact(2, 1)
    log.crash()
    assert (log.first_index, log.last_index) == (3, 5)
    assert log.sync_count == 3


def test_unsynced_writes_are_lost_on_crash() -> None:
    log = MemoryLogStore(sync_on_write=False)
    log.append(1, batch(1, 1, 3))
    log.sync()
    log.append(2, batch(2, 20, 3))  # truncates synced entries 2-3: must come back
    log.compact(3, 2)
    assert log.unsynced_operations == 2
    durable = log.clone_durable()
    log.crash()
    for store in (log, durable):
        assert (store.snapshot_index, store.last_index) == (0, 3)
        assert store.entries(1, 4) == batch(1, 1, 3)
        assert store.index_of_request(rid(2)) == 2
        assert store.index_of_request(rid(20)) is None


def test_crash_can_keep_a_prefix_of_unsynced_operations() -> None:
    log = MemoryLogStore(sync_on_write=False)
    log.append(1, batch(1, 1, 2))
    log.append(3, batch(1, 3, 2))
    log.append(2, batch(2, 20, 1))
    log.crash(keep_unsynced=2)
    assert terms(log.entries(1, 5)) == [1, 1, 1, 1]
    assert log.unsynced_operations == 0
    log.append(5, batch(1, 5, 1))
    log.crash()  # what crash(keep_unsynced) kept counts as synced
    assert log.last_index == 4


def test_clone_is_independent() -> None:
    log = MemoryLogStore()
    log.append(1, batch(1, 1, 2))
    clone = log.clone_durable()
    clone.append(3, batch(1, 3, 1))
    log.set_commit_floor(2)
    assert (log.last_index, clone.last_index) == (2, 3)
    assert log.clone_durable().commit_floor == 2


def test_hard_state_crash() -> None:
    store = MemoryHardStateStore(sync_on_write=False)
    store.save(HardState(current_term=2))
    store.sync()
    store.save(HardState(current_term=3, voted_for="b"))
    assert store.clone_durable().load() == HardState(current_term=2)
    store.crash()
    assert store.load() == HardState(current_term=2)


def test_snapshot_crash_drops_unsynced_install_and_pending_receive() -> None:
    snaps = MemorySnapshotStore(sync_on_write=False)
    snaps.install(3, 1, b"abc")
    snaps.sync()
    snaps.install(5, 2, b"defg")
    snaps.begin(9, 2, 10)
    snaps.write_chunk(0, b"12345")
    assert snaps.clone_durable().meta() == SnapshotMeta(3, 1, 3)
    snaps.crash()
    assert snaps.meta() == SnapshotMeta(3, 1, 3)
    assert snaps.read(0, 10) == b"abc"
    assert snaps.begin(9, 2, 10) == 0
