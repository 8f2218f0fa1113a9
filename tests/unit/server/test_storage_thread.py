"""``StorageThread``: in-order, merged, durable writes off the loop; the barrier; failures.

Runs against a real RocksDB in a temp directory (the thread's whole job is the synced write);
the slow disk and the failing disk are planted by wrapping ``RocksLogStore.write_synced``.
"""

from __future__ import annotations

import select
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftlog.consensus import LogAppend
from raftlog.entry import EntryType, LogEntry
from raftlog.errors import StorageError
from raftlog.server.durable_writes import merge_appends
from raftlog.server.storage_thread import StorageThread
from raftlog.storage.base import HardState
from raftlog.storage.hard_state import RocksHardStateStore
from raftlog.storage.rocks import RocksLogStore, open_storage


def entries(first: int, count: int, term: int = 1) -> tuple[LogEntry, ...]:
    return tuple(
        LogEntry(n.to_bytes(12, "big"), EntryType.STATE, term, b"e%d" % n)
        for n in range(first, first + count)
    )


class Gate:
    """Holds every synced write of the log store until ``open`` (a slow fsync)."""

    def __init__(self, log: RocksLogStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.event = threading.Event()
        self.started = threading.Semaphore(0)
        self.batches = 0
        real = log.write_synced

        def held(batch: object, what: str) -> None:
            self.batches += 1
            self.started.release()
            self.event.wait(10)
            real(batch, what)  # type: ignore[arg-type]

        monkeypatch.setattr(log, "write_synced", held)

    def open(self) -> None:
        self.event.set()


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[RocksLogStore, RocksHardStateStore]]:
    log, hard_state, snapshots = open_storage(tmp_path)
    yield log, hard_state
    log.close()
    hard_state.close()
    snapshots.close()


def readable(fd: int, timeout: float = 5.0) -> bool:
    return bool(select.select([fd], [], [], timeout)[0])


def test_a_write_is_durable_after_the_thread_signals_and_the_caches_follow_only_then(
    stores: tuple[RocksLogStore, RocksHardStateStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    log, hard_state = stores
    gate = Gate(log, monkeypatch)
    thread = StorageThread(log, hard_state, inline_entries=-1)  # every write on the thread
    try:
        ticket = thread.submit(HardState(current_term=3), LogAppend(1, entries(1, 2)))
        assert gate.started.acquire(timeout=5)
        assert thread.durable() == 0 and log.last_index == 0  # in flight: nothing claimed
        gate.open()
        assert readable(thread.fd)
        assert thread.durable() == ticket
        assert log.last_index == 2 and hard_state.load().current_term == 3
    finally:
        thread.close()


def test_writes_queued_during_an_fsync_go_together_into_the_next_one(
    stores: tuple[RocksLogStore, RocksHardStateStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    log, hard_state = stores
    gate = Gate(log, monkeypatch)
    thread = StorageThread(log, hard_state, inline_entries=-1)  # every write on the thread
    try:
        thread.submit(HardState(current_term=1), LogAppend(1, entries(1, 3)))
        assert gate.started.acquire(timeout=5)
        thread.submit(None, LogAppend(4, entries(4, 2)))
        replacement = entries(3, 1, term=2)
        last = thread.submit(HardState(current_term=2), LogAppend(3, replacement))  # truncates
        gate.open()
        thread.wait()
        assert thread.durable() == last and gate.batches == 2  # three Readies, two fsyncs
        assert log.last_index == 3 and log.term_at(3) == 2 and log.term_at(2) == 1
        assert log.entries(3, 4) == list(replacement)
        assert hard_state.load().current_term == 2
    finally:
        thread.close()


def test_applied_progress_rides_on_the_next_batch_or_is_written_when_idle(
    stores: tuple[RocksLogStore, RocksHardStateStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    log, hard_state = stores
    thread = StorageThread(log, hard_state, inline_entries=-1)  # every write on the thread
    try:
        thread.submit(HardState(current_term=1), LogAppend(1, entries(1, 4)))
        thread.wait()
        thread.record_applied(2)  # idle: written at once
        assert hard_state.load().last_applied == 2
        gate = Gate(log, monkeypatch)
        thread.submit(None, LogAppend(5, entries(5, 1)))
        assert gate.started.acquire(timeout=5)
        thread.record_applied(4)  # in flight: must not race the batch's hard state
        assert hard_state.load().last_applied == 2
        thread.submit(HardState(current_term=1, last_applied=0), None)
        gate.open()
        thread.wait()
        assert hard_state.load() == HardState(current_term=1, last_applied=4)
    finally:
        thread.close()


def test_a_failed_write_stops_every_later_one(
    stores: tuple[RocksLogStore, RocksHardStateStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    log, hard_state = stores

    def full_disk(batch: object, what: str) -> None:
        raise StorageError("writing ready: No space left on device")

    monkeypatch.setattr(log, "write_synced", full_disk)
    thread = StorageThread(log, hard_state, inline_entries=-1)  # every write on the thread
    try:
        thread.submit(None, LogAppend(1, entries(1, 1)))
        with pytest.raises(StorageError, match="No space"):
            thread.wait()
        with pytest.raises(StorageError, match="No space"):
            thread.submit(None, LogAppend(1, entries(1, 1)))
        assert log.last_index == 0
    finally:
        thread.close()


def test_a_direct_write_of_the_store_waits_for_the_batch_in_flight(
    stores: tuple[RocksLogStore, RocksHardStateStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compaction rewrites the meta record from the cached bounds: were it to run while an
    append is in flight, one of the two would write a stale last index."""
    log, hard_state = stores
    thread = StorageThread(log, hard_state, inline_entries=-1)  # every write on the thread
    log.before_write = thread.wait
    try:
        thread.submit(HardState(current_term=1), LogAppend(1, entries(1, 4)))
        thread.wait()
        gate = Gate(log, monkeypatch)
        thread.submit(None, LogAppend(5, entries(5, 2)))
        assert gate.started.acquire(timeout=5)
        threading.Timer(0.2, gate.open).start()
        monkeypatch.undo()  # compaction's own synced write goes straight through
        log.compact(3, 1)
        assert (log.first_index, log.last_index) == (4, 6)
        reopened = RocksLogStore(log.database)
        assert (reopened.first_index, reopened.last_index) == (4, 6)
        reopened.close()
    finally:
        thread.close()


def test_close_is_idempotent_and_wait_returns_after_it(
    stores: tuple[RocksLogStore, RocksHardStateStore],
) -> None:
    log, hard_state = stores
    thread = StorageThread(log, hard_state, inline_entries=-1)  # every write on the thread
    thread.submit(None, LogAppend(1, entries(1, 1)))
    thread.close()
    thread.close()
    thread.wait()
    with pytest.raises(StorageError):
        thread.submit(None, None)


def test_merging_appends_keeps_the_later_one_where_they_overlap() -> None:
    a = LogAppend(5, entries(5, 3))
    assert merge_appends(None, a) is a
    assert merge_appends(a, LogAppend(8, entries(8, 1))).entries == entries(5, 4)
    overlap = merge_appends(a, LogAppend(6, entries(6, 1, term=2)))
    assert overlap.first_index == 5 and [e.term for e in overlap.entries] == [1, 2]
    assert merge_appends(a, LogAppend(4, ())) == LogAppend(4, ())  # truncates all of it
    with pytest.raises(ValueError, match="gap"):
        merge_appends(a, LogAppend(9, entries(9, 1)))


def test_a_prune_with_nothing_to_forget_does_not_wait_for_the_write_in_flight(
    stores: tuple[RocksLogStore, RocksHardStateStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The peer's housekeeping asks every second; blocking the loop for an fsync each time
    would bring back the stalls the thread removes."""
    log, hard_state = stores
    thread = StorageThread(log, hard_state, inline_entries=-1)  # every write on the thread
    waits: list[int] = []

    def counting_wait() -> None:
        waits.append(1)
        thread.wait()

    log.before_write = counting_wait
    try:
        thread.submit(HardState(current_term=1), LogAppend(1, entries(1, 4)))
        thread.wait()
        gate = Gate(log, monkeypatch)
        thread.submit(None, LogAppend(5, entries(5, 1)))
        assert gate.started.acquire(timeout=5)
        assert log.prune_request_ids(1) == 0 and waits == []  # nothing below index 1
        gate.open()
        assert log.prune_request_ids(3) == 2 and waits == [1]
        assert thread.durable() == thread.submitted
    finally:
        thread.close()


def test_a_small_batch_with_nothing_in_flight_is_written_inline_a_larger_one_on_the_thread(
    stores: tuple[RocksLogStore, RocksHardStateStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #28: at light load the hand-over to the thread and back only adds two
    wake-ups to every update; a batch of more entries means updates are queuing, and the
    loop then gains from receiving during the fsync."""
    log, hard_state = stores
    writers: list[str] = []
    real = log.write_synced

    def recording(batch: object, what: str) -> None:
        writers.append(threading.current_thread().name)
        real(batch, what)  # type: ignore[arg-type]

    monkeypatch.setattr(log, "write_synced", recording)
    thread = StorageThread(log, hard_state, inline_entries=1)
    try:
        ticket = thread.submit(HardState(current_term=3), LogAppend(1, entries(1, 1)))
        assert thread.durable() == ticket and log.last_index == 1  # durable on return
        ticket = thread.submit(None, LogAppend(2, entries(2, 2)))
        assert readable(thread.fd)
        assert thread.durable() == ticket and log.last_index == 3
        assert writers == [threading.current_thread().name, "raftlog-storage"]
    finally:
        thread.close()
