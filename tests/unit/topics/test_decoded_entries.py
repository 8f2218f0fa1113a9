"""The topics machine's decoded entries (``raftlog.topics.decoded_entries``): many reads of
one entry decode it once; the bounds hold; compacted entries are never answered; a
snapshot restore forgets."""

from __future__ import annotations

from pathlib import Path

from machine_log import Log

from raftlog.entry import LogEntry
from raftlog.storage.memory import MemoryLogStore
from raftlog.topics import wire as rpc
from raftlog.topics.decoded_entries import RECORD_COST, DecodedEntries
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.records import Record
from raftlog.topics.records_tx import (
    TxControl,
    decode_any_entry,
    encode_tx_control,
    encode_tx_store,
)
from raftlog.topics.stamp import stamp_append_time
from raftlog.topics.wire_fetch import TYPE_FETCH, FetchRequest, encode_fetch_request


def _published(log: Log, *sizes: int) -> list[int]:
    log.create("t")
    return [log.publish(Record("t", bytes([n % 251]) * n)) for n in sizes]


def test_readers_woken_by_one_record_decode_its_entry_once(
    log: Log, machine: TopicStateMachine
) -> None:
    """The case it is for: a hundred ``TF`` wake-ups and reads of the same new record."""
    (index,) = _published(log, 1_000_000)
    log.apply(machine)
    before = machine._reader.decoded.reads
    wake = encode_fetch_request(FetchRequest(rpc.ReadRequest("t", 0, wait_ms=1000), max_bytes=0))
    read = rpc.encode_read_request(rpc.ReadRequest("t", 0))
    for _ in range(100):
        woken = rpc.decode_read_response(machine.handle_request(TYPE_FETCH, wake) or [])
        assert woken.more and not woken.records
        answer = rpc.decode_read_response(machine.handle_request(rpc.TYPE_READ, read) or [])
        assert [(i.id.index, len(i.record.value)) for i in answer.records] == [
            (index, 1_000_000)
        ]
    assert machine._reader.decoded.reads - before == 1


def test_kept_entries_stay_within_their_bytes_and_count() -> None:
    log = Log()
    indexes = _published(log, *([300] * 10), 12_000)
    entries = DecodedEntries(log.store, decode_any_entry, kept_bytes=10_000, kept_entries=4)
    for index in indexes[:10]:
        entries.get(index)
    assert entries.reads == 10
    for index in indexes[6:10]:  # the last four read are kept
        entries.get(index)
    assert entries.reads == 10
    entries.get(indexes[0])  # the least recently read went first
    assert entries.reads == 11
    big = entries.get(indexes[10])  # larger than all the bytes kept: answered, not kept
    assert big is not None and entries.get(indexes[10]) is not None
    assert entries.reads == 13
    for index in indexes[:5]:  # at most four entries
        entries.get(index)
    reads = entries.reads
    for index in indexes[:5]:
        entries.get(index)
    assert entries.reads - reads >= 1  # not all five are kept


def test_compacted_entries_are_never_answered_from_what_is_kept() -> None:
    log = Log()
    first, second = _published(log, 10, 20)
    entries = DecodedEntries(log.store, decode_any_entry)
    assert entries.get(first) is not None and entries.get(second) is not None
    log.store.compact(first, 1)
    assert entries.get(first) is None
    assert entries.get(second) is not None
    assert entries.reads == 2  # the one left was still kept


def test_entries_that_are_not_there_or_not_topic_entries_are_none() -> None:
    store = MemoryLogStore()
    entries = DecodedEntries(store, decode_any_entry)
    assert entries.get(1) is None  # no such entry
    store.append(1, [LogEntry(bytes(12), 1, 1, b"plain update, no topic magic")])
    assert entries.get(1) is None
    assert entries.get(1) is None
    assert entries.reads == 2  # not kept: nothing to keep


def test_a_snapshot_restore_forgets_what_was_kept(log: Log, tmp_path: Path) -> None:
    """A restore replaces the log below the snapshot: nothing decoded before it is used."""
    indexes = _published(log, 10, 20, 30)
    machine = TopicStateMachine(tmp_path / "m", log.store)
    try:
        log.apply(machine)
        decoded = machine._reader.decoded
        assert len(machine.read(rpc.ReadRequest("t", 0)).records) == 3
        reads = decoded.reads
        decoded.get(indexes[0])
        assert decoded.reads == reads  # kept
        machine.restore(log.store.last_index, 1, machine.snapshot(log.store.last_index))
        decoded.get(indexes[0])
        assert decoded.reads == reads + 1  # forgotten: read again
    finally:
        machine.close()


def test_many_small_records_weigh_what_their_objects_cost() -> None:
    """An entry of many empty records is small on disk but not in memory: it is weighed
    by its records too, so a scan of such entries keeps few of them."""
    log = Log()
    log.create("t")
    indexes = [log.publish(*[Record("t", b"")] * 1000) for _ in range(4)]  # ~8 KB raw each
    weight = 1000 * RECORD_COST * 2 + 20_000
    entries = DecodedEntries(log.store, decode_any_entry, kept_bytes=weight)
    for index in indexes:
        entries.get(index)
    for index in indexes[-2:]:  # two fit the weight
        entries.get(index)
    assert entries.reads == 4
    entries.get(indexes[0])  # the others went, though 32 KB of raw bytes would have fit
    assert entries.reads == 5


def _commit_reads(log: Log, machine: TopicStateMachine, stores: int) -> int:
    """Entries read from the log by the apply of a commit of ``stores`` stores of 100
    records each (applied before it), after checking the commit made them all visible."""
    log.create("t")
    begin = encode_tx_control(TxControl("begin", "tx", 60_000))
    log.add(stamp_append_time(begin, log.now))
    for _ in range(stores):
        log.add(stamp_append_time(encode_tx_store("tx", [Record("t", b"v")] * 100), log.now))
    log.apply(machine)
    reads = machine._reader.decoded.reads
    log.add(stamp_append_time(encode_tx_control(TxControl("commit", "tx")), log.now))
    log.apply(machine)
    read_again = machine._reader.decoded.reads - reads
    assert len(machine.read(rpc.ReadRequest("t", 0)).records) == 100 * stores
    return read_again


def test_a_commit_reads_its_stores_from_what_their_apply_decoded(
    log: Log, machine: TopicStateMachine
) -> None:
    """A store is decoded at its apply and again, whole, by its commit's apply: the commit
    now finds it kept (65,536 records: 0.16 -> 0.03 s)."""
    assert _commit_reads(log, machine, 3) == 0  # no store read from the log again


def test_a_commit_larger_than_what_is_kept_reads_only_what_was_evicted(
    log: Log, machine: TopicStateMachine
) -> None:
    """Stores are read newest first: in log order each kept store was evicted by the one
    read before it, and every store was read and decoded again."""
    machine._reader.decoded._kept_bytes = 2 * (100 * RECORD_COST + 2_000)  # two stores
    assert _commit_reads(log, machine, 4) == 2  # the two oldest; 4 in log order
