"""Per-topic monitoring totals (``topic_counters``): fed by apply, advanced by retention,
derived again after a restart and a snapshot restore -- always equal to what a read returns."""

from __future__ import annotations

from pathlib import Path

import pytest
from machine_log import Log
from test_topic_machine import read

from raftlog.statemachine.composite import CompositeStateMachine
from raftlog.storage.memory_snapshot import MemorySnapshotStore
from raftlog.topics import counters as counters_module
from raftlog.topics.counters import TopicTotals
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.opening import open_topic_machine
from raftlog.topics.records import Record, RecordId, TopicCommand, encode_command


def totals(machine: TopicStateMachine, name: str) -> TopicTotals:
    got = machine.counters.get(name)
    assert got is not None, f"no totals for {name}"
    return got


def counts(machine: TopicStateMachine, name: str) -> tuple[int, ...] | None:
    """What the metrics show of a topic's totals. Its cursor (``start``) is left out: for a
    topic with a window it may trail the retention start between the window's deadlines,
    over entries that hold none of its records (``counters._looked_at_again``)."""
    t = machine.counters.get(name)
    return None if t is None else t.figures()


def retained(machine: TopicStateMachine, name: str) -> tuple[int, int]:
    """What a read returns: (records, bytes)."""
    records = read(machine, name, limit=10_000).records
    return len(records), sum(r.record.size for r in records)


def test_publishes_count_records_and_bytes_per_topic(log: Log, machine: TopicStateMachine) -> None:
    log.create("a")
    log.create("b")
    log.publish(Record("a", b"12345"), Record("b", b"xy"), Record("a", b"678", b"k"))
    log.publish(Record("b", b"z"))
    log.apply(machine)
    a, b = totals(machine, "a"), totals(machine, "b")
    assert (a.records, a.bytes, a.published_records, a.published_bytes) == (2, 9, 2, 9)
    assert (b.records, b.bytes, b.published_records, b.published_bytes) == (2, 3, 2, 3)
    assert (a.records, a.bytes) == retained(machine, "a")
    assert machine.counters.stats(10) == (("a", 2, 9, 2, 9, 0, 0), ("b", 2, 3, 2, 3, 0, 0))
    assert machine.counters.stats(1) == (("a", 2, 9, 2, 9, 0, 0),)


def test_auto_created_recreated_and_deleted_topics(log: Log, machine: TopicStateMachine) -> None:
    log.publish(Record("auto", b"abc"), auto=True)
    log.apply(machine)
    assert totals(machine, "auto").records == 1
    log.add(encode_command(TopicCommand("delete", "auto")))
    log.apply(machine)
    assert machine.counters.get("auto") is None
    log.create("auto")
    log.publish(Record("auto", b"q"))
    log.apply(machine)
    t = totals(machine, "auto")
    assert (t.records, t.bytes, t.expired_records) == (1, 1, 0)  # a new incarnation


def test_time_retention_moves_records_from_the_gauge_to_the_expired_counter(
    log: Log, machine: TopicStateMachine
) -> None:
    log.create("t", retention_ms=1_000)
    log.publish(Record("t", b"aa"), Record("t", b"bb"), at=1_000)
    log.publish(Record("t", b"ccc"), at=1_500)
    log.apply(machine)
    machine.on_timer(0.0)
    assert (totals(machine, "t").records, totals(machine, "t").expired_records) == (3, 0)
    log.tick(2_000)  # the first entry's two records expire
    log.apply(machine)
    machine.on_timer(10.0)
    t = totals(machine, "t")
    assert (t.records, t.bytes, t.expired_records, t.expired_bytes) == (1, 3, 2, 4)
    assert (t.records, t.bytes) == retained(machine, "t")
    log.tick(2_500)
    log.apply(machine)
    machine.on_timer(20.0)
    t = totals(machine, "t")
    assert (t.records, t.bytes, t.expired_records, t.expired_bytes) == (0, 0, 3, 7)
    assert t.published_records == 3  # the rate counter never goes down


def test_size_retention_cutting_inside_an_entry(log: Log, machine: TopicStateMachine) -> None:
    log.create("s", max_bytes=250)
    log.publish(*(Record("s", b"%d" % n + b"x" * 99) for n in range(3)))  # 3 x 100 B
    log.apply(machine)
    machine.on_timer(0.0)
    t = totals(machine, "s")
    assert (t.records, t.bytes, t.expired_records) == (2, 200, 1)
    log.publish(Record("s", b"3" + b"x" * 99))
    log.apply(machine)
    machine.on_timer(10.0)
    t = totals(machine, "s")
    assert (t.records, t.bytes, t.expired_records, t.expired_bytes) == (2, 200, 2, 200)
    assert (t.records, t.bytes) == retained(machine, "s")
    assert t.start.position == 2  # the cut is inside the first entry


def test_a_lowered_limit_counts_what_it_removes(log: Log, machine: TopicStateMachine) -> None:
    log.create("u")
    log.publish(Record("u", b"a" * 100))
    log.publish(Record("u", b"b" * 100))
    log.apply(machine)
    machine.on_timer(0.0)
    log.add(encode_command(TopicCommand("update", "u", {"max_bytes": 100})))
    log.apply(machine)
    machine.on_timer(10.0)
    t = totals(machine, "u")
    assert (t.records, t.bytes, t.expired_records, t.expired_bytes) == (1, 100, 1, 100)


def test_totals_are_derived_again_after_a_restart(log: Log, tmp_path: Path) -> None:
    log.create("r", max_bytes=250)
    log.create("plain")
    log.publish(*(Record("r", b"%d" % n + b"x" * 99) for n in range(3)))
    log.publish(Record("plain", b"p" * 7), Record("r", b"y" * 10))
    first = TopicStateMachine(tmp_path / "topics", log.store)
    log.apply(first)
    first.on_timer(0.0)
    before = first.counters.stats(10)
    first.close()
    snapshots = MemorySnapshotStore()
    again = open_topic_machine(tmp_path / "topics", log.store, snapshots, log.store.last_index)
    try:
        after = again.counters.stats(10)
        # the gauges come back; the counters restart at zero, like any process's counters
        assert [s[:3] for s in after] == [s[:3] for s in before]
        assert [s[3:] for s in after] == [(0, 0, 0, 0)] * 2
        assert totals(again, "r").records == retained(again, "r")[0] == 3
        assert totals(again, "r").bytes == retained(again, "r")[1] == 210
    finally:
        again.close()


def test_a_restart_mid_catch_up_counts_nothing_twice(log: Log, tmp_path: Path) -> None:
    log.create("c")
    log.publish(Record("c", b"1"))
    m = TopicStateMachine(tmp_path / "topics", log.store)
    log.apply(m)
    m.close()
    log.publish(Record("c", b"22"))  # the index misses this one: catch-up re-applies it
    again = open_topic_machine(tmp_path / "topics", log.store, MemorySnapshotStore(), 3)
    try:
        t = totals(again, "c")
        assert (t.records, t.bytes, t.published_records) == (2, 3, 0)
    finally:
        again.close()


def test_a_snapshot_restore_and_compaction(log: Log, tmp_path: Path) -> None:
    log.create("k")
    for n in range(5):
        log.publish(Record("k", b"v%d" % n))
    original = TopicStateMachine(tmp_path / "orig", log.store)
    log.apply(original)
    data = CompositeStateMachine([original]).snapshot(4)
    original.close()
    log.store.compact(4, 1)  # entries 1..4 (create + 3 records) leave the log
    snapshots = MemorySnapshotStore()
    snapshots.install(4, 1, data)
    behind = open_topic_machine(tmp_path / "behind", log.store, snapshots, log.store.last_index)
    try:
        t = totals(behind, "k")
        assert (t.records, t.bytes) == retained(behind, "k") == (2, 4)
        assert t.start >= RecordId(5, 0)
    finally:
        behind.close()


def test_records_below_a_compacted_log_count_as_gone(log: Log, machine: TopicStateMachine) -> None:
    log.create("g")
    first = log.publish(Record("g", b"1"))
    log.publish(Record("g", b"2"))
    log.apply(machine)
    machine.on_timer(0.0)
    log.store.compact(first, 1)  # (the peer never does this past a retained record)
    machine.on_timer(10.0)
    t = totals(machine, "g")
    assert (t.records, t.expired_records) == (retained(machine, "g")[0], 1) == (1, 1)


def test_per_record_ttls_expire_from_the_gauges_once(log: Log, machine: TopicStateMachine) -> None:
    log.create("m", retention_ms=10_000)
    log.publish(Record("m", b"brief", ttl_ms=500), Record("m", b"kept"), at=1_000)
    log.publish(Record("m", b"short", ttl_ms=2_000), at=1_000)
    log.apply(machine)
    machine.on_timer(0.0)
    assert (totals(machine, "m").records, totals(machine, "m").expired_records) == (3, 0)
    log.tick(1_500)  # "brief" expires by its own TTL
    log.apply(machine)
    machine.on_timer(10.0)
    t = totals(machine, "m")
    assert (t.records, t.bytes, t.expired_records, t.expired_bytes) == (2, 9, 1, 5)
    assert (t.records, t.bytes) == retained(machine, "m")
    log.tick(11_000)  # the topic's window passes all three: "brief" is not counted again
    log.apply(machine)
    machine.on_timer(20.0)
    t = totals(machine, "m")
    assert (t.records, t.bytes, t.expired_records, t.expired_bytes) == (0, 0, 3, 14)
    assert t.ttl_gone == {} and t.ttl_due == []


def test_a_ttl_only_topic_forgets_the_records_it_expired(
    log: Log, machine: TopicStateMachine
) -> None:
    log.create("ttl")  # no time or size window: only the records' own TTLs remove anything
    log.publish(Record("ttl", b"long", ttl_ms=5_000), at=1_000)
    for n in range(3):
        log.publish(Record("ttl", b"s%d" % n, ttl_ms=100), at=1_000)
    log.apply(machine)
    log.tick(1_200)
    log.apply(machine)
    machine.on_timer(0.0)
    t = totals(machine, "ttl")
    assert (t.records, t.expired_records) == (1, 3) == (retained(machine, "ttl")[0], 3)
    assert len(t.ttl_gone) == 3  # behind the long-lived first record
    log.tick(6_000)
    log.apply(machine)
    machine.on_timer(10.0)
    t = totals(machine, "ttl")
    assert (t.records, t.bytes, t.expired_records) == (0, 0, 4)
    assert t.ttl_gone == {}  # the cursor moved past all of them
    log.publish(Record("ttl", b"new"), at=6_000)
    log.apply(machine)
    machine.on_timer(20.0)
    assert (totals(machine, "ttl").records, totals(machine, "ttl").bytes) == (1, 3)


def test_topics_at_rest_are_skipped_only_where_advancing_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``advance_all`` skips a topic when advancing it would leave its totals as they are
    (most topics: no window, nothing due), so a peer with 50,000 topics does not spend
    ~150 ms of its loop every second. Two machines apply the same log, one with the skip
    and one without it; after every pass their totals are identical: topics without a
    window, with time and size windows, with record TTLs, a topic the log's compaction
    passes, an updated one (its low-water mark), a re-created one, and one given a TTL record
    after passes that found it at rest. A topic at rest is not looked at again until one of
    those events: each of them left out once fails here."""
    log = Log()
    fast = TopicStateMachine(tmp_path / "fast", log.store)
    slow = TopicStateMachine(tmp_path / "slow", log.store)
    calls = [0]
    real_at_rest = counters_module._at_rest

    def never_at_rest(*args: object) -> bool:
        calls[0] += 1
        return False

    def check(now: float) -> None:
        log.apply(fast)
        log.apply(slow)
        fast.on_timer(now)
        with monkeypatch.context() as patched:
            patched.setattr(counters_module, "_at_rest", never_at_rest)
            patched.setattr(counters_module, "_looked_at_again", lambda *args: True)
            slow.on_timer(now)
        for name in set(fast.topics) | set(slow.topics):
            assert counts(fast, name) == counts(slow, name), name

    try:
        log.create("plain")
        log.create("empty")
        log.create("timed", retention_ms=5_000)
        log.create("sized", max_bytes=6)
        log.create("ttl")
        log.create("lowered", retention_ms=1_000)
        log.create("late")  # at rest for two passes, then given a record with a TTL
        first = log.publish(Record("plain", b"12"), Record("timed", b"345"), at=1_000_000)
        log.publish(Record("lowered", b"old"), at=1_000_000)
        log.publish(Record("sized", b"6789"), Record("ttl", b"x", ttl_ms=300), at=1_000_000)
        check(0.0)
        log.publish(Record("sized", b"abcd"), Record("plain", b"yz"), at=1_000_100)
        log.tick(1_000_500)  # the TTL record expires
        check(10.0)
        log.add(encode_command(TopicCommand("update", "plain", {"retention_ms": 1_000})))
        log.tick(1_003_000)  # "plain" now has a window that passes its records
        # "lowered" loses its window after it passed its record: the low-water mark, not a
        # window, now says the record is gone, before its totals were advanced
        log.add(encode_command(TopicCommand("update", "lowered", {"retention_ms": None})))
        check(20.0)
        assert fast.topics["lowered"].properties.retention_ms is None
        assert fast.topics["lowered"].low_water > RecordId(0, 0)
        log.store.compact(first, 1)  # passes "empty" and the first records
        log.add(encode_command(TopicCommand("delete", "sized")))
        log.create("sized")
        log.publish(Record("sized", b"new"), Record("empty", b"e"))
        check(30.0)
        check(32.0)  # every topic the compaction moved is at rest again
        log.publish(Record("late", b"t", ttl_ms=500), at=1_009_000)
        check(35.0)
        log.tick(1_010_000)  # "late"'s record expires
        check(40.0)
        assert counts(fast, "late") == counts(slow, "late")
        assert totals(fast, "late").expired_records == 1
        assert calls[0] > 0
        looked_at: list[str] = []

        def counting(state: object, *args: object) -> bool:
            looked_at.append("topic")
            return real_at_rest(state, *args)  # type: ignore[arg-type]

        monkeypatch.setattr(counters_module, "_at_rest", counting)
        log.tick(1_011_000)
        check(50.0)
        assert 0 < len(looked_at) < len(fast.topics)  # topics at rest are not looked at again
        skipped = sum(
            real_at_rest(fast.topics[n], t, log.store.first_index, fast.last_time)
            for n in fast.topics
            if (t := fast.counters.get(n)) is not None
        )
        assert skipped > 0  # the skip took part
    finally:
        fast.close()
        slow.close()


def test_first_names_follow_the_topics_through_every_change(log: Log, tmp_path: Path) -> None:
    """The status view's names (``first_names``, sorted once per change of the topic set) are
    the machine's topics in order after creates, auto-creates, deletes, re-creates and a
    snapshot restore; between changes the same tuple is handed out again (not re-sorted)."""
    first = TopicStateMachine(tmp_path / "first", log.store)
    second = TopicStateMachine(tmp_path / "second", log.store)

    def check(machine: TopicStateMachine, limit: int = 3) -> None:
        names = machine.counters.first_names(limit)
        assert names == tuple(sorted(machine.topics)[:limit])
        assert machine.counters.first_names(limit) is names  # cached until the set changes
        assert [s[0] for s in machine.counters.stats(limit)] == list(names)

    try:
        empty = second.snapshot(0)
        for name in ("m", "c", "x", "a"):
            log.create(name)
            log.apply(first)
            check(first)
        check(first, limit=10)
        log.publish(Record("b", b"auto"), auto=True)
        log.apply(first)
        check(first)
        log.add(encode_command(TopicCommand("delete", "a")))
        log.apply(first)
        check(first)
        log.create("a")
        log.apply(first)
        check(first)
        check(second)  # nothing applied: no topics
        second.restore(log.store.last_index, 1, first.snapshot(log.store.last_index))
        check(second)
        assert second.counters.first_names(10) == ("a", "b", "c", "m", "x")
        first.restore(log.store.last_index, 1, empty)  # a snapshot without topics
        check(first)
        assert first.counters.first_names(10) == ()
    finally:
        first.close()
        second.close()
