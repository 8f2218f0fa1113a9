"""The leader's topic gate (raftlog.topics.gate) over a real topic state machine:
what gets stamped, what gets refused and why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from raftlog.cluster_clock import encode_time_checkpoint
from raftlog.entry import EntryType, LogEntry
from raftlog.server.disk_guard import DiskGuard
from raftlog.storage.memory import MemoryLogStore
from raftlog.topics.clock import TopicClock
from raftlog.topics.gate import TopicGate
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.record_decode import decode_entry
from raftlog.topics.records import (
    Expectation,
    Record,
    RecordBatch,
    TopicCommand,
    TopicError,
    encode_clock_tick,
    encode_command,
    encode_records,
)
from raftlog.topics.records_kv import encode_conditional
from raftlog.topics.records_tx import encode_tx_store
from raftlog.topics.stamp import stamp_append_time

RID = b"\x07" * 12
MAX_RECORDS = 4


@pytest.fixture
def machine(tmp_path: Path) -> Iterator[TopicStateMachine]:
    store = MemoryLogStore()
    machine = TopicStateMachine(tmp_path / "t", store)
    create = encode_command(TopicCommand("create", "t", {"max_record_bytes": 10}))
    store.append(1, [LogEntry(b"\x01" * 12, 0, 1, create)])
    machine.apply(1, store.raw_entries(1, 2), 1)
    yield machine
    machine.close()


def gate(machine: TopicStateMachine, *, auto_create: bool = False) -> TopicGate:
    times = iter([5_000, 4_000, 6_000])
    return TopicGate(machine, auto_create=auto_create, max_data=200, max_records=MAX_RECORDS,
                     now_ms=lambda: next(times))


def test_a_valid_entry_is_stamped_never_earlier_than_the_last_stamp(
    machine: TopicStateMachine,
) -> None:
    g = gate(machine)
    data = encode_records([Record("t", b"v")])
    first, second = g.prepare(data), g.prepare(data)  # the wall clock stepped back
    assert isinstance(first, bytes) and isinstance(second, bytes)
    one, two = decode_entry(first), decode_entry(second)
    assert isinstance(one, RecordBatch) and isinstance(two, RecordBatch)
    assert (one.append_time_ms, two.append_time_ms) == (5_000, 5_000)
    assert one.records == (Record("t", b"v"),) and not one.auto_create


def test_plain_data_passes_untouched(machine: TopicStateMachine) -> None:
    data = b"not a topic entry"
    assert gate(machine).prepare(data) is data


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (encode_records([Record("nosuch", b"v")]), "UnknownTopic"),
        (encode_records([Record("t", b"x" * 11)]), "RecordTooLarge"),
        (encode_command(TopicCommand("create", "t")), "TopicExists"),
        (encode_command(TopicCommand("delete", "u")), "UnknownTopic"),
        (b"\xc1RLT\x01\x01\x00" + bytes(8) + b"\x93", "BadRecord"),
        (encode_clock_tick(7), "BadRecord"),  # ticks are the leader's own
        # over max_data: checked here too, for the leader's own entries (dead letters)
        (encode_records([Record("t", b"v", b"k" * 200)]), "EntryTooLarge"),
        # more records than max_records, in every kind of entry that publishes records
        (encode_records([Record("t", b"v")] * 5), "TooManyRecords"),
        (encode_records([Record("nosuch", b"v")] * 5), "TooManyRecords"),  # before decoding
        (encode_tx_store("tx", [Record("t", b"v")] * 5), "TooManyRecords"),
        (encode_conditional([Record("t", b"v")] * 5, [Expectation("t", None)]),
         "TooManyRecords"),
    ],
)
def test_refused_entries_say_why(machine: TopicStateMachine, data: bytes, code: str) -> None:
    refused = gate(machine).prepare(data)
    assert isinstance(refused, TopicError) and refused.name == code


@pytest.mark.parametrize(
    ("args", "msg_id", "code"),
    [
        ([b"plain data"], RID, "BadRequest"),
        ([], RID, "BadRequest"),
        ([encode_records([Record("t", b"v")])], b"\x01", "BadRequest"),
        ([encode_records([Record("t", b"v" * 10, b"k" * 200)])], RID, "EntryTooLarge"),
    ],
)
def test_bad_publish_frames_are_refused(
    machine: TopicStateMachine, args: list[bytes], msg_id: bytes, code: str
) -> None:
    error = gate(machine).check_publish(msg_id, tuple(args))
    assert error is not None and error.name == code


def test_good_publish_frames_pass(machine: TopicStateMachine) -> None:
    assert gate(machine).check_publish(RID, (encode_records([Record("t", b"v")]),)) is None


def test_auto_create_flag_follows_the_leader_option(machine: TopicStateMachine) -> None:
    stamped = gate(machine, auto_create=True).prepare(encode_records([Record("fresh", b"v")]))
    assert isinstance(stamped, bytes)
    entry = decode_entry(stamped)
    assert isinstance(entry, RecordBatch) and entry.auto_create


def test_the_leader_ticks_the_log_clock_only_when_a_record_is_due(tmp_path: Path) -> None:
    store = MemoryLogStore()
    machine = TopicStateMachine(tmp_path / "clock", store)
    create = encode_command(TopicCommand("create", "r", {"retention_ms": 1_000}))
    record = stamp_append_time(encode_records([Record("r", b"v")]), 10_000)
    store.append(1, [LogEntry(b"\x01" * 12, 0, 1, create), LogEntry(b"\x02" * 12, 0, 1, record)])
    machine.apply(1, store.raw_entries(1, 3), 1)
    ticks: list[int] = []
    core = SimpleNamespace(is_leader=True, stamp_time=lambda ms: ticks.append(ms) or len(ticks))
    now = [10_500]
    clock = TopicClock(core, machine, SimpleNamespace(now=lambda: now[0], peek=lambda: now[0]))
    clock.on_timer()  # the record expires at 11_000: nothing to do yet
    now[0] = 11_600
    clock.on_timer()
    clock.on_timer()  # at most one look (and tick) per interval
    assert ticks == [11_600]
    checkpoint = LogEntry(bytes(12), EntryType.CHECKPOINT, 1, encode_time_checkpoint(11_600))
    store.append(3, [checkpoint])
    machine.apply(3, store.raw_entries(3, 4), 1)
    assert machine.last_time == 11_600  # the time checkpoint moved the log clock
    core.is_leader = False
    now[0] = 20_000
    clock.on_timer()  # followers never tick
    assert len(ticks) == 1
    machine.close()


def test_needs_prepare_is_false_only_where_prepare_changes_nothing(
    machine: TopicStateMachine, tmp_path: Path
) -> None:
    """Issue #28: the leader skips ``prepare`` for a batch the gate says it would not change.
    So ``needs_prepare`` must be True for any topic entry (valid, refused or malformed) and
    for every update while the disk is low, and False for plain data, whose ``prepare`` is
    the data itself."""
    free = [10**9]
    disk = DiskGuard(tmp_path, 1000, _Quiet(), free_bytes=lambda _: free[0])
    g = TopicGate(machine, auto_create=False, max_data=200, max_records=MAX_RECORDS,
                  now_ms=lambda: 5_000, disk=disk)
    plain = [b"not a topic entry", b"", b"\xc1RL", b"x" * 100]
    for data in plain:
        assert not g.needs_prepare([data]) and g.prepare(data) is data
    assert not g.needs_prepare(plain) and not g.needs_prepare([])
    topic = [
        encode_records([Record("t", b"v")]),
        encode_records([Record("nosuch", b"v")]),
        encode_command(TopicCommand("create", "u")),
        b"\xc1RLT\x01\x01\x00" + bytes(8) + b"\x93",  # malformed
    ]
    for data in topic:
        assert g.needs_prepare([data]) and g.needs_prepare([*plain, data])
    free[0] = 10  # the disk is low: plain data is refused, so every batch is prepared
    disk.check()
    assert g.needs_prepare([b"x"]) and isinstance(g.prepare(b"x"), TopicError)


class _Quiet:
    """An event log that drops what the disk guard logs."""

    def info(self, event: str, **fields: object) -> None:
        """Dropped."""

    def warning(self, event: str, **fields: object) -> None:
        """Dropped."""

    def error(self, event: str, **fields: object) -> None:
        """Dropped."""
