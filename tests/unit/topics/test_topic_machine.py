"""TopicStateMachine on a memory log: apply rules, reads, retention, snapshots, rebuilds."""

from __future__ import annotations

import shutil
from pathlib import Path

import msgpack
import pytest
from machine_log import Log

from raftlog.entry import EntryType
from raftlog.errors import RecordsExpiredError
from raftlog.statemachine.composite import CompositeStateMachine
from raftlog.storage.memory_snapshot import MemorySnapshotStore
from raftlog.topics import wire as rpc
from raftlog.topics.machine import TopicStateMachine, check_entry, snapshot_part
from raftlog.topics.reads import READ_BUDGET
from raftlog.topics.records import (
    Record,
    RecordBatch,
    RecordId,
    TopicCommand,
    TopicError,
    TopicProperties,
    encode_command,
    encode_records,
)


def values(result: rpc.ReadResult) -> list[bytes]:
    return [r.record.value for r in result.records]


def ids(result: rpc.ReadResult) -> list[tuple[int, int]]:
    return [(r.id.index, r.id.position) for r in result.records]


def read(m: TopicStateMachine, topic: str, **kw: object) -> rpc.ReadResult:
    return m.read(rpc.ReadRequest(topic, **kw))  # type: ignore[arg-type]


def test_records_are_indexed_per_topic_in_log_order(log: Log, machine: TopicStateMachine) -> None:
    log.create("a")
    log.create("b")
    log.add(b"plain application data")  # not a topic entry: skipped, never an error
    i1 = log.publish(Record("a", b"a1"), Record("b", b"b1"), Record("a", b"a2"))
    log.add(b"\xc0", EntryType.CHECKPOINT)
    i2 = log.publish(Record("a", b"a3", b"key", {"h": b"v"}, 42))
    log.apply(machine)
    assert machine.last_applied == log.store.last_index
    a = read(machine, "a")
    assert ids(a) == [(i1, 0), (i1, 2), (i2, 0)]
    assert values(a) == [b"a1", b"a2", b"a3"]
    assert a.records[2].record == Record("a", b"a3", b"key", {"h": b"v"}, 42)
    assert a.applied == log.store.last_index and not a.more
    assert values(read(machine, "b")) == [b"b1"]
    assert rpc.decode_list_response(machine.handle_request(rpc.TYPE_LIST, []) or []) == ("a", "b")


def test_reads_from_an_id_inclusive_or_exclusive_and_limited(
    log: Log, machine: TopicStateMachine
) -> None:
    log.create("t")
    first = log.publish(*(Record("t", b"%d" % n) for n in range(3)))
    second = log.publish(Record("t", b"3"))
    log.apply(machine)
    assert ids(read(machine, "t", from_index=first, from_position=1)) == [
        (first, 1),
        (first, 2),
        (second, 0),
    ]
    assert ids(read(machine, "t", from_index=first, from_position=1, inclusive=False)) == [
        (first, 2),
        (second, 0),
    ]
    assert ids(read(machine, "t", from_index=first, inclusive=False)) == [(second, 0)]
    assert ids(read(machine, "t", from_index=second + 1)) == []
    page = read(machine, "t", limit=2)
    assert ids(page) == [(first, 0), (first, 1)] and page.more
    last = page.records[-1].id
    rest = read(machine, "t", from_index=last.index, from_position=last.position, inclusive=False)
    assert ids(rest) == [(first, 2), (second, 0)] and not rest.more


def test_a_read_holds_at_most_its_byte_budget_a_larger_record_alone(
    log: Log, machine: TopicStateMachine
) -> None:
    """Records up to ``READ_BUDGET`` together; a first record larger than it alone. (The
    record that passed the budget used to be sent too: answers of up to 14 MiB.)"""
    mib = 1024 * 1024
    log.create("t")
    for size in (3 * mib, 3 * mib, mib // 2, mib // 2, 6 * mib, 1):
        log.publish(Record("t", b"v" * size))
    log.apply(machine)
    pages, after = [], None
    while True:
        kw = {} if after is None else {"from_index": after.index, "from_position":
                                       after.position, "inclusive": False}
        page = read(machine, "t", **kw)
        pages.append([len(v) // (mib // 2) for v in values(page)])
        assert sum(map(len, values(page))) <= READ_BUDGET or len(page.records) == 1
        if not page.more:
            break
        after = page.records[-1].id
    assert pages == [[6], [6, 1, 1], [12], [0]]


def test_reads_from_a_time_return_exactly_records_appended_at_or_after_it(
    log: Log, machine: TopicStateMachine
) -> None:
    log.create("t")
    log.create("other")
    log.publish(Record("t", b"early"), at=1000)
    log.publish(Record("other", b"x"), at=1500)
    log.publish(Record("t", b"skewed"), at=900)  # a new leader with a slow clock: clamped
    log.publish(Record("t", b"late"), at=2000)
    log.apply(machine)
    everything = read(machine, "t")
    assert [r.append_time_ms for r in everything.records] == [1000, 1500, 2000]
    assert values(read(machine, "t", from_time_ms=1000)) == [b"early", b"skewed", b"late"]
    assert values(read(machine, "t", from_time_ms=1000, inclusive=False)) == [b"skewed", b"late"]
    assert values(read(machine, "t", from_time_ms=1501)) == [b"late"]
    assert values(read(machine, "t", from_time_ms=2001)) == []
    assert machine.last_time == 2000


def test_a_batch_is_applied_whole_or_not_at_all(log: Log, machine: TopicStateMachine) -> None:
    log.create("small", max_record_bytes=4)
    log.create("t")
    unknown = log.publish(Record("t", b"1"), Record("missing", b"2"))
    too_big = log.publish(Record("t", b"ok"), Record("small", b"12345"))
    fine = log.publish(Record("t", b"3"), Record("small", b"1234"))
    log.apply(machine)
    assert machine.refused_entries == 2
    refusals = (machine.refusal_at(unknown), machine.refusal_at(too_big))
    assert [e.name if e else None for e in refusals] == ["UnknownTopic", "RecordTooLarge"]
    assert machine.refusal_at(fine) is None
    assert [r.id.index for r in read(machine, "t").records] == [fine]
    assert values(read(machine, "small")) == [b"1234"]
    assert "missing" not in machine.topics
    assert unknown < too_big < fine


def test_auto_create_is_decided_by_the_leader_flag(log: Log, machine: TopicStateMachine) -> None:
    index = log.publish(Record("fresh", b"x"), auto=True)
    log.apply(machine)
    assert machine.topics["fresh"].created_index == index
    assert machine.topics["fresh"].properties == TopicProperties()
    assert values(read(machine, "fresh")) == [b"x"]


def test_admin_commands(log: Log, machine: TopicStateMachine) -> None:
    created = log.create("t", retention_ms=1000)
    log.create("t", retention_ms=5)  # exists: a no-op
    log.add(encode_command(TopicCommand("update", "t", {"max_bytes": 10})))
    log.add(encode_command(TopicCommand("update", "nope", {"max_bytes": 10})))  # no-op
    log.publish(Record("t", b"old"))
    log.add(encode_command(TopicCommand("delete", "t")))
    log.apply(machine)
    assert "t" not in machine.topics
    with pytest.raises(TopicError, match="UnknownTopic"):
        read(machine, "t")
    recreated = log.create("t")
    log.publish(Record("t", b"new"))
    log.apply(machine)
    assert values(read(machine, "t")) == [b"new"]  # the deleted topic's records are gone
    assert machine.topics["t"].created_index == recreated != created


def test_leader_checks_match_apply_rules(log: Log, machine: TopicStateMachine) -> None:
    log.create("t", max_record_bytes=2)
    log.apply(machine)
    topics = machine.topics
    assert check_entry(TopicCommand("create", "t"), topics, False).name == "TopicExists"  # type: ignore[union-attr]
    assert check_entry(TopicCommand("delete", "u"), topics, False).name == "UnknownTopic"  # type: ignore[union-attr]
    assert check_entry(TopicCommand("update", "t"), topics, False) is None
    big = RecordBatch((Record("t", b"123"),))
    assert check_entry(big, topics, True).name == "RecordTooLarge"  # type: ignore[union-attr]
    unknown = RecordBatch((Record("u", b"1"),))
    error = check_entry(unknown, topics, False)
    assert (
        error is not None and error.name == "UnknownTopic" and "topic_auto_create" in error.message
    )
    assert check_entry(unknown, topics, True) is None


def test_retention_hides_expired_records_and_cleanup_drops_their_keys(
    log: Log, machine: TopicStateMachine, tmp_path: Path
) -> None:
    log.create("ttl", retention_ms=1000)
    log.create("keep")
    log.publish(Record("ttl", b"old"), Record("keep", b"k1"), at=10_000)
    log.publish(Record("ttl", b"new"), Record("keep", b"k2"), at=10_600)
    log.tick(10_999)
    log.apply(machine)
    assert values(read(machine, "ttl")) == [b"old", b"new"]
    log.tick(11_000)  # append 10_000 + 1000: expired
    log.apply(machine)
    assert values(read(machine, "ttl")) == [b"new"]
    assert values(read(machine, "ttl", from_index=0)) == [b"new"]  # before creation: no error
    with pytest.raises(RecordsExpiredError) as expired:
        read(machine, "ttl", from_index=3)
    assert expired.value.first_available == (4, 0)
    info = machine.describe("ttl")
    assert info.first == info.last and info.last_append_time_ms == 10_600
    log.tick(11_600)
    log.apply(machine)
    assert values(read(machine, "ttl")) == []
    assert machine.describe("ttl").first is None
    assert values(read(machine, "keep")) == [b"k1", b"k2"]  # other topics keep theirs


def test_replays_are_tolerated(log: Log, machine: TopicStateMachine) -> None:
    log.create("t")
    log.publish(Record("t", b"1"))
    log.publish(Record("t", b"2"))
    raw = log.store.raw_entries(1, 4)
    machine.apply(1, raw[:2], 1)
    machine.apply(1, raw, 1)  # overlapping replay
    machine.apply(2, raw[1:], 1)  # full replay
    assert values(read(machine, "t")) == [b"1", b"2"]


def test_state_survives_reopening(log: Log, tmp_path: Path) -> None:
    m = TopicStateMachine(tmp_path / "db", log.store)
    log.create("t", retention_ms=10**9)
    log.publish(Record("t", b"1"), at=5)
    log.apply(m)
    m.close()
    m = TopicStateMachine(tmp_path / "db", log.store)
    try:
        assert m.last_applied == 2 and m.last_time == 5
        assert m.topics["t"].properties.retention_ms == 10**9
        assert values(read(m, "t")) == [b"1"]
    finally:
        m.close()


def _fill(log: Log) -> None:
    log.create("a", retention_ms=10**9)
    log.create("b")
    for n in range(20):
        log.publish(Record("a" if n % 3 else "b", b"%d" % n), Record("b", b"x%d" % n), at=n * 10)
    log.add(encode_command(TopicCommand("delete", "b")))
    log.create("b")
    log.publish(Record("b", b"after"), at=500)


def _dump(m: TopicStateMachine) -> dict[str, list[tuple[int, int, int, bytes]]]:
    return {
        t: [
            (r.id.index, r.id.position, r.append_time_ms, r.record.value)
            for r in read(m, t).records
        ]
        for t in sorted(m.topics)
    }


def test_catch_up_rebuilds_a_lost_or_stale_index_from_the_log(log: Log, tmp_path: Path) -> None:
    _fill(log)
    full = TopicStateMachine(tmp_path / "full", log.store)
    log.apply(full)
    expected = _dump(full)
    full.close()
    stale = TopicStateMachine(tmp_path / "stale", log.store)
    stale.apply(1, log.store.raw_entries(1, 12), 1)  # a crash lost the rest of its writes
    stale.close()
    for path in ("stale", "lost"):
        m = TopicStateMachine(tmp_path / path, log.store)
        m.catch_up(MemorySnapshotStore(), log.store.last_index)
        try:
            assert m.last_applied == log.store.last_index
            assert _dump(m) == expected
        finally:
            m.close()


def state_map(retention_ms: int, created: int, low_water: list[int]) -> dict[str, object]:
    """A topic's state in the snapshot (``raftlog.topics.state``, layout 3)."""
    return {
        "v": 3,
        "retention_ms": retention_ms,
        "created_index": created,
        "low_water": low_water,
    }


def test_snapshots_are_exact_as_of_their_index(log: Log, machine: TopicStateMachine) -> None:
    created = log.create("t", retention_ms=50)
    log.publish(Record("t", b"1"), at=700)
    mid = log.add(encode_command(TopicCommand("update", "t", {"retention_ms": 60})))
    log.publish(Record("t", b"2"), at=800)
    log.add(encode_command(TopicCommand("delete", "t")))
    log.apply(machine)
    at = {i: msgpack.unpackb(machine.snapshot(i)) for i in range(0, log.store.last_index + 1)}
    assert at[0] == {"v": 4, "time": 0, "topics": {}}
    # the low-water moves past the records the snapshot's log no longer holds
    # (the topic was deleted meanwhile, its records with it: no low-water to raise; a peer
    # restoring this snapshot deletes the topic again when it replays the delete)
    assert at[created + 1] == {
        "v": 4,
        "time": 700,
        "topics": {"t": state_map(50, created, [0, 0])},
    }
    assert at[mid]["topics"] == {"t": state_map(60, created, [created, 0])}
    assert at[mid + 1]["time"] == 800
    assert at[log.store.last_index]["topics"] == {}


def test_restore_then_apply_continues_like_the_original(log: Log, tmp_path: Path) -> None:
    _fill(log)
    original = TopicStateMachine(tmp_path / "orig", log.store)
    log.apply(original)
    cut = 15
    data = CompositeStateMachine([original]).snapshot(cut)  # the peer's snapshot format
    expected_after = {t: [r for r in rs if r[0] > cut] for t, rs in _dump(original).items()}
    original.close()
    log.store.compact(cut, 1)
    snapshots = MemorySnapshotStore()
    snapshots.install(cut, 1, data)
    behind = TopicStateMachine(tmp_path / "behind", log.store)
    behind.catch_up(snapshots, log.store.last_index)  # restores the snapshot, then replays
    try:
        assert behind.last_applied == log.store.last_index
        assert _dump(behind) == expected_after
        assert snapshot_part(data, "topics") == behind.snapshot(cut)
    finally:
        behind.close()


def test_compacted_entries_are_not_served_and_their_keys_go(
    log: Log, machine: TopicStateMachine
) -> None:
    log.create("t")
    first = log.publish(Record("t", b"1"), at=1)
    second = log.publish(Record("t", b"2"), at=2)
    log.apply(machine)
    snapshot = machine.snapshot(first)
    log.store.compact(first, 1)
    assert values(read(machine, "t")) == [b"2"]
    assert values(read(machine, "t", from_time_ms=0)) == [b"2"]
    machine.on_timer(0.0)
    assert [e.index for e in machine._index.entries("t", 0)] == [first, second]
    assert machine.snapshot(first) == snapshot  # the time as of the cut is still known
    log.store.compact(second, 1)
    machine.on_timer(2.0)  # the topic's last entry below the floor is kept (its low-water)
    assert [e.index for e in machine._index.entries("t", 0)] == [second]
    assert msgpack.unpackb(machine.snapshot(second))["time"] == 2


def test_malformed_topic_entries_are_skipped(log: Log, machine: TopicStateMachine) -> None:
    log.create("t")
    log.add(b"\xc1RLT\x01\x01\x00" + bytes(8) + b"\x93")  # magic, truncated body
    log.add(b"\xc1RLT\x09")  # unknown version, too short
    log.add(encode_records([Record("t", b"config?")]), EntryType.CONFIG)  # not STATE: ignored
    log.publish(Record("t", b"ok"))
    log.apply(machine)
    assert machine.malformed_entries == 2
    assert values(read(machine, "t")) == [b"ok"]


def test_handle_request_answers_topic_rpcs_only(log: Log, machine: TopicStateMachine) -> None:
    log.create("t", retention_ms=10**9)
    index = log.publish(Record("t", b"v"), at=log.now)
    log.apply(machine)
    machine.set_leader(True, 1)
    answer = machine.handle_request(rpc.TYPE_READ, rpc.encode_read_request(rpc.ReadRequest("t")))
    result = rpc.decode_read_response(answer or [])
    assert values(result) == [b"v"] and result.is_leader
    info = rpc.decode_describe_response(machine.handle_request(rpc.TYPE_DESCRIBE, [b"t"]) or [])
    assert info.first == info.last == RecordId(index, 0)
    assert info.properties.retention_ms == 10**9
    with pytest.raises(TopicError, match="UnknownTopic"):
        rpc.decode_read_response(
            machine.handle_request(rpc.TYPE_READ, rpc.encode_read_request(rpc.ReadRequest("u")))
            or []
        )
    with pytest.raises(TopicError, match="BadRequest"):
        rpc.decode_read_response(machine.handle_request(rpc.TYPE_READ, [b"\x93"]) or [])
    assert machine.handle_request(b"*", []) is None
    assert machine.handle_request(b"XX", []) is None


def test_a_deleted_database_directory_starts_empty(log: Log, tmp_path: Path) -> None:
    log.create("t")
    m = TopicStateMachine(tmp_path / "gone", log.store)
    log.apply(m)
    m.close()
    shutil.rmtree(tmp_path / "gone")
    m = TopicStateMachine(tmp_path / "gone", log.store)
    try:
        assert m.last_applied == 0 and not m.topics
    finally:
        m.close()
