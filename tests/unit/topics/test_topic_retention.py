"""Issue #11 rules of the topic machine: log clock, size retention, per-record TTL, the
low-water mark, the compaction limit and the leader's expiry deadline."""

from __future__ import annotations

from pathlib import Path

import pytest
from machine_log import Log
from test_topic_machine import read, values

from raftlog.entry import ENTRY_HEADER_SIZE
from raftlog.errors import RecordsExpiredError
from raftlog.topics import retention
from raftlog.topics.client_view import TopicBounds, TopicView
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.record_decode import decode_entry
from raftlog.topics.records import (
    ClockTick,
    Record,
    RecordId,
    TopicCommand,
    encode_clock_tick,
    encode_command,
)


def test_clock_ticks_round_trip_and_move_only_the_clock(
    log: Log, machine: TopicStateMachine
) -> None:
    assert decode_entry(encode_clock_tick(42)) == ClockTick(42)
    log.create("t")
    log.tick(5_000)
    log.tick(4_000)  # a leader with a slower clock: the log clock never goes back
    log.apply(machine)
    assert machine.last_time == 5_000 and machine.refused_entries == 0


def test_size_retention_keeps_the_newest_records_that_fit(
    log: Log, machine: TopicStateMachine
) -> None:
    log.create("s", max_bytes=250)
    first = log.publish(*(Record("s", b"%d" % n + b"x" * 99) for n in range(3)))  # 3 x 100 B
    second = log.publish(Record("s", b"3" + b"x" * 99))
    log.apply(machine)
    # 400 B published, 250 kept: records 2 and 3 (the last 200 B); record 1 would make 300
    assert [v[:1] for v in values(read(machine, "s"))] == [b"2", b"3"]
    with pytest.raises(RecordsExpiredError) as err:
        read(machine, "s", from_index=first)
    assert err.value.first_available == (first, 2)
    assert values(read(machine, "s", from_index=first, from_position=2))[0][:1] == b"2"
    info = machine.describe("s")
    assert (info.first, info.last, info.low_water) == (
        RecordId(first, 2),
        RecordId(second, 0),
        RecordId(first, 2),
    )
    assert info.published_bytes == 400


def test_a_raised_limit_resurrects_nothing(log: Log, machine: TopicStateMachine) -> None:
    log.create("s", max_bytes=100)
    log.publish(Record("s", b"a" * 100))
    kept = log.publish(Record("s", b"b" * 100))
    log.add(encode_command(TopicCommand("update", "s", {"max_bytes": 10_000})))
    log.apply(machine)
    assert [r.id for r in read(machine, "s").records] == [RecordId(kept, 0)]
    log.publish(Record("s", b"c" * 100))
    log.apply(machine)
    assert len(read(machine, "s").records) == 2


def test_per_record_ttl_is_shorter_than_the_topic_and_runs_on_the_log_clock(
    log: Log, machine: TopicStateMachine
) -> None:
    log.create("m", retention_ms=10_000)
    brief = log.publish(Record("m", b"brief", ttl_ms=500), at=1_000)
    log.publish(Record("m", b"kept"), at=1_000)
    log.apply(machine)
    assert machine.next_expiry() == 1_500
    log.tick(1_499)
    log.apply(machine)
    assert values(read(machine, "m")) == [b"brief", b"kept"]
    log.tick(1_500)
    log.apply(machine)
    assert values(read(machine, "m")) == [b"kept"]
    assert values(read(machine, "m", from_index=brief)) == [b"kept"]  # TTL: no low-water
    assert machine.next_expiry() == 11_000  # the topic's own retention is next


def test_compaction_never_passes_a_retained_record(log: Log, machine: TopicStateMachine) -> None:
    log.create("short", retention_ms=100)
    log.create("long")
    log.publish(Record("short", b"x"), at=1_000)
    kept = log.publish(Record("long", b"y"), at=1_000)
    log.publish(Record("short", b"z"), at=1_050)
    log.apply(machine)
    assert machine.compaction_limit() == 2  # below the first record of either topic
    log.tick(1_100)
    log.apply(machine)
    assert machine.compaction_limit() == kept - 1  # "short"'s first record expired
    log.add(encode_command(TopicCommand("delete", "long")))
    log.tick(1_200)
    log.apply(machine)
    assert machine.compaction_limit() == machine.last_applied  # nothing retained at all
    assert machine.next_expiry() is None


def test_size_and_time_retention_survive_compaction_of_the_size_start(
    log: Log, machine: TopicStateMachine
) -> None:
    """A topic with both windows: time retention passed its two older entries, so the log
    was compacted past them, though the size window (50 B published, 40 kept) starts inside
    the first. The index dropped the first entry's keys but its running byte sum ended
    exactly where the kept entry begins, and that size key stayed: the size start then
    resolved to "past everything" and a read returned nothing, a still retained record
    included (found by ``test_retention_schedule``'s random logs). Now the size key goes
    with the entry, and a size start in an entry without keys starts after it (an index
    written before keeps such keys)."""
    log.create("both", retention_ms=100, max_bytes=40)
    log.publish(Record("both", b"a" * 30), at=1_000)
    second = log.publish(Record("both", b"b" * 10), at=1_000)
    kept = log.publish(Record("both", b"c" * 10), at=1_200)
    log.tick(1_250)
    log.apply(machine)
    assert values(read(machine, "both")) == [b"c" * 10]
    assert machine.compaction_limit() == kept - 1
    log.store.compact(kept - 1, 1)
    machine.on_timer(0.0)  # the index drops the keys of the entries that left the log
    assert machine._index.first_entry_past_bytes("both", 0) == second  # the first's: gone
    assert values(read(machine, "both")) == [b"c" * 10]
    assert machine.describe("both").first == RecordId(kept, 0)


def test_topic_view_admits_what_a_read_returns(log: Log, machine: TopicStateMachine) -> None:
    log.create("v", max_bytes=100)
    log.publish(Record("v", b"old" * 40))  # 120 B: over the limit once the next comes
    log.add(encode_command(TopicCommand("delete", "v")))
    log.create("v", max_bytes=100)
    log.publish(Record("v", b"a" * 60))
    log.publish(Record("v", b"b" * 60), Record("v", b"c", ttl_ms=1), at=log.now)
    log.tick(log.now + 5)
    log.publish(Record("gone", b"x"), auto=True)
    log.add(encode_command(TopicCommand("delete", "gone")))
    log.apply(machine)
    info = machine.describe("v")
    assert info.low_water is not None
    view = TopicView({"v": TopicBounds(info.created_index, info.low_water, info.log_clock_ms)}, 0)
    raw = log.store.raw_entries(1, log.store.last_index + 1)
    admitted = []
    for index, data in enumerate(raw, start=1):
        entry = decode_entry(data[ENTRY_HEADER_SIZE:])
        for position, record in enumerate(getattr(entry, "records", ())):
            if view.admits(index, position, entry.append_time_ms, record):  # type: ignore[union-attr]
                admitted.append((index, position))
    assert admitted == [(r.id.index, r.id.position) for r in read(machine, "v").records]
    assert len(admitted) == 1  # "b": "a" fell out of max_bytes, "c" out of its TTL


def test_the_first_index_at_a_time_is_asked_again_after_each_write(
    log: Log, machine: TopicStateMachine
) -> None:
    """``first_index_at`` keeps its last answer for the timer pass that asks it once per
    topic; a write (a new entry at a later time) must not leave it stale."""
    log.create("t")
    log.publish(Record("t", b"1"), at=100)
    log.apply(machine)
    index = machine._index
    assert index.first_index_at(150) is None
    assert index.first_index_at(150) is None  # kept
    later = log.publish(Record("t", b"2"), at=200)
    log.apply(machine)
    assert index.first_index_at(150) == later


def test_ttl_deadlines_survive_a_restart_and_passed_ones_are_forgotten(
    log: Log, tmp_path: Path
) -> None:
    """The leader ticks the log clock at the next TTL deadline so a record expires on time.
    Those deadlines lived in memory: after a restart a record applied before it was not
    known, and stayed readable until the idle stamp (30 s) moved the clock. They are index
    keys now, the next one a seek away; the keys of passed ones go with the clean-up."""
    log.create("m", retention_ms=600_000)
    log.publish(Record("m", b"brief", ttl_ms=500), Record("m", b"longer", ttl_ms=900), at=1_000)
    log.publish(Record("m", b"kept"), at=1_000)
    log.publish(Record("m", b"brief too", ttl_ms=500), at=1_000)
    first = TopicStateMachine(tmp_path / "m", log.store)
    log.apply(first)
    first.close()
    again = TopicStateMachine(tmp_path / "m", log.store)
    try:
        assert again.next_expiry() == 1_500
        log.tick(1_500)
        log.apply(again)
        assert values(read(again, "m")) == [b"longer", b"kept"]
        assert again.next_expiry() == 1_900
        again.on_timer(0.0)
        assert again._index.next_ttl_deadline(-1) == 1_900  # 1_500's keys are gone
        log.tick(1_900)
        log.apply(again)
        again.on_timer(10.0)
        assert again._index.next_ttl_deadline(-1) is None
        assert again.next_expiry() == 601_000  # the topic's own retention is next
    finally:
        again.close()


def test_describe_looks_at_a_bounded_number_of_expired_records_from_the_end(
    log: Log, machine: TopicStateMachine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last retained record was found walking back over every TTL-expired one after it;
    now at most ``FIRST_RETAINED_SCAN`` of them (then the one it stopped at, a bound)."""
    log.create("t", retention_ms=600_000)
    kept = log.publish(Record("t", b"kept"), at=1_000)
    for _ in range(30):
        log.publish(*[Record("t", b"brief", ttl_ms=10)] * 10, at=1_000)
    log.tick(2_000)
    log.apply(machine)
    assert machine.describe("t").last == RecordId(kept, 0)
    decoded = [0]
    real = machine._reader.records_at

    def counted(index: int) -> object:
        decoded[0] += 1
        return real(index)

    monkeypatch.setattr(machine._reader, "records_at", counted)
    monkeypatch.setattr(retention, "FIRST_RETAINED_SCAN", 25)
    last = machine.describe("t").last
    assert last is not None and last > RecordId(kept, 0)  # a bound: nothing retained after it
    assert decoded[0] <= 2 * (25 // 10 + 2)  # entries of 10 records, from each end
