"""The log view: stable store + unstable tail + pending snapshot install."""

from __future__ import annotations

import pytest
from consensus_helpers import entry

from raftlog.consensus.raft_log import RaftLog
from raftlog.consensus.ready import LogAppend
from raftlog.entry import ZERO_REQUEST_ID, LogEntry
from raftlog.storage.memory import MemoryLogStore


def _log(terms: list[int]) -> tuple[RaftLog, MemoryLogStore]:
    store = MemoryLogStore()
    if terms:
        store.append(1, [entry(t) for t in terms])
    return RaftLog(store), store


def test_view_reads_stable_then_unstable_entries() -> None:
    log, _ = _log([1, 1])
    log.append([entry(2), entry(2)])
    assert log.last_index == 4
    assert [log.term_at(i) for i in range(0, 6)] == [0, 1, 1, 2, 2, None]
    assert [e.term for e in log.entries(1, 5)] == [1, 1, 2, 2]
    assert log.persisted_last_index == 2


def test_entries_byte_budget_spans_stable_and_unstable_and_returns_at_least_one() -> None:
    log, _ = _log([1])
    log.append([entry(1), entry(1)])
    one = entry(1).size
    assert len(log.entries(1, 4, max_bytes=2 * one)) == 2
    assert len(log.entries(2, 4, max_bytes=1)) == 1


def test_truncation_hides_stable_suffix_until_written() -> None:
    log, store = _log([1, 1, 1])
    replacement = entry(2)
    log.truncate_and_append(2, [replacement])
    assert log.last_index == 2 and log.term_at(2) == 2 and log.term_at(3) is None
    pending = log.take_append()
    assert pending == LogAppend(2, (replacement,))
    store.append(pending.first_index, pending.entries)
    log.stable_to(pending)
    assert log.pending_append() is None
    assert log.persisted_last_index == 2


def test_stable_to_keeps_entries_replaced_after_the_ready_was_taken() -> None:
    log, store = _log([])
    first = entry(1)
    log.append([first])
    written = log.take_append()
    assert written is not None
    log.truncate_and_append(1, [entry(2)])  # a conflict arrived while persisting
    store.append(written.first_index, written.entries)
    log.stable_to(written)
    assert log.term_at(1) == 2
    again = log.pending_append()
    assert again is not None and again.first_index == 1 and again.entries[0].term == 2


def test_writes_in_flight_are_not_handed_out_again_and_complete_in_order() -> None:
    log, store = _log([])
    log.append([entry(1), entry(1)])
    first = log.take_append()
    assert first == LogAppend(1, first.entries) and len(first.entries) == 2
    assert log.take_append() is None  # nothing new while the first write is in flight
    log.append([entry(1)])
    second = log.take_append()
    assert second is not None and second.first_index == 3 and len(second.entries) == 1
    assert log.persisted_last_index == 0
    for write in (first, second):
        store.append(write.first_index, write.entries)
        log.stable_to(write)
    assert log.persisted_last_index == 3 and log.pending_append() is None


def test_a_truncation_into_a_write_in_flight_is_written_after_it() -> None:
    log, store = _log([])
    log.append([entry(1), entry(1), entry(1)])
    first = log.take_append()
    assert first is not None
    replacement = entry(2)
    log.truncate_and_append(2, [replacement])  # a new leader overwrites 2..3 meanwhile
    second = log.take_append()
    assert second == LogAppend(2, (replacement,))
    store.append(first.first_index, first.entries)
    log.stable_to(first)
    assert log.persisted_last_index == 1  # only the entry that was not replaced
    store.append(second.first_index, second.entries)
    log.stable_to(second)
    assert log.persisted_last_index == 2 and log.term_at(2) == 2
    assert store.last_index == 2 and store.term_at(2) == 2


def test_request_ids_in_a_truncated_stable_suffix_are_not_found() -> None:
    gone = entry(1)
    store = MemoryLogStore()
    store.append(1, [entry(1), gone])
    log = RaftLog(store)
    assert log.index_of_request(gone.request_id) == 2
    log.truncate_and_append(2, [entry(2)])
    assert log.index_of_request(gone.request_id) is None


def test_request_ids_made_durable_then_truncated_are_not_found() -> None:
    """An id whose entry was written through the tail, then truncated: the tail no longer
    maps it, and the store's copy is being truncated."""
    log, store = _log([])
    gone = entry(1)
    log.append([entry(1), gone])
    _persist(log, store)
    assert log.index_of_request(gone.request_id) == 2
    log.truncate_and_append(2, [entry(2)])
    assert log.index_of_request(gone.request_id) is None


def test_ids_of_a_write_still_in_flight_are_found_after_an_earlier_write_completes() -> None:
    """Two writes in flight (the storage thread): the first completing leaves the second's
    ids mapped, since the store does not have them yet."""
    log, store = _log([])
    early, late = entry(1), entry(1)
    log.append([early])
    first = log.take_append()
    log.append([late])
    second = log.take_append()
    assert first is not None and second is not None
    store.append(first.first_index, first.entries)
    log.stable_to(first)
    assert log.indexes_of_requests([early.request_id, late.request_id]) == [1, 2]
    store.append(second.first_index, second.entries)
    log.stable_to(second)
    assert log.indexes_of_requests([early.request_id, late.request_id]) == [1, 2]


def test_the_zero_id_of_checkpoints_is_never_found() -> None:
    """The zero request id (checkpoints, configurations) is no request: never a retry."""
    log, store = _log([])
    log.append([LogEntry.checkpoint(1), entry(1)])
    assert log.index_of_request(ZERO_REQUEST_ID) is None
    _persist(log, store)
    assert log.index_of_request(ZERO_REQUEST_ID) is None


def test_the_batch_lookup_answers_as_the_lookup_of_each_id() -> None:
    """``indexes_of_requests`` (a proposal batch, issue #28): the unstable tail first, the
    store for the rest, and never a stable entry that is being truncated."""
    kept, gone, replaced = entry(1), entry(1), entry(1)
    store = MemoryLogStore()
    store.append(1, [kept, gone, replaced])
    log = RaftLog(store)
    fresh = entry(2)
    log.truncate_and_append(2, [fresh])
    ids = [kept.request_id, gone.request_id, fresh.request_id, b"\x07" * 12, kept.request_id]
    assert log.indexes_of_requests(ids) == [1, None, 2, None, 1]
    assert log.indexes_of_requests(ids) == [log.index_of_request(i) for i in ids]
    assert log.indexes_of_requests([]) == []


def test_snapshot_matching_the_log_keeps_the_suffix() -> None:
    log, _ = _log([1, 1, 2, 2])
    assert log.install_snapshot(2, 1)
    assert log.snapshot_index == 2 and log.first_index == 3 and log.last_index == 4
    assert log.term_at(1) is None and log.term_at(2) == 1


def test_snapshot_not_matching_the_log_discards_it() -> None:
    log, _ = _log([1, 1, 2, 2])
    assert not log.install_snapshot(3, 3)
    assert log.last_index == 3 and log.term_at(3) == 3 and log.term_at(4) is None
    pending = log.pending_append()
    assert pending is not None and pending.first_index == 4 and pending.entries == ()


def test_entries_outside_the_view_raise() -> None:
    log, _ = _log([1])
    with pytest.raises(IndexError):
        log.entries(1, 3)


class _CountingStore(MemoryLogStore):
    reads = 0

    def entries(self, lo: int, hi: int, max_bytes: int | None = None):  # type: ignore[no-untyped-def]
        self.reads += 1
        return super().entries(lo, hi, max_bytes)


def _persist(log: RaftLog, store: MemoryLogStore) -> None:
    pending = log.take_append()
    assert pending is not None
    store.append(pending.first_index, pending.entries)
    log.stable_to(pending)


def test_recently_persisted_entries_are_served_from_memory_and_equal_the_store() -> None:
    store = _CountingStore()
    log = RaftLog(store)
    log.append([entry(1) for _ in range(5)])
    _persist(log, store)
    assert log.entries(2, 6, 10**6) == store.entries(2, 6)
    assert store.reads == 1  # only the comparison above read the store
    assert [log.term_at(i) for i in (1, 5)] == [1, 1]


def test_recent_window_follows_truncation_and_snapshots() -> None:
    store = _CountingStore()
    log = RaftLog(store)
    log.append([entry(1) for _ in range(4)])
    _persist(log, store)
    log.truncate_and_append(3, [entry(2)])
    _persist(log, store)
    assert [e.term for e in log.entries(1, 4)] == [1, 1, 2]
    assert log.entries(1, 4) == store.entries(1, 4)
    log.install_snapshot(2, 1)
    store.compact(2, 1)
    log.snapshot_persisted(2, 1)
    assert log.entries(3, 4) == store.entries(3, 4)
