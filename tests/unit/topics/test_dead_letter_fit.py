"""Dead-letter copies always fit one entry and the dead-letter topic's record limit
(``raftlog.topics.groups.deadletter``, "Copies that would not fit").

Before: a record as large as its own entry allowed, once dead, was copied with the
dead-letter headers into an entry over ``max_log_entry_data_size``; every peer's storage
refused it and the peer exited, and each new leader proposed it again -- one nack took the
whole cluster down (``tests/faults/test_dead_letter_limits.py`` on real peers)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from machine_log import Log

from raftlog.topics import wire as rpc
from raftlog.topics.groups.deadletter import REASON_KEPT, DeadLetters
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.records import Record, RecordBatch, encode_records
from raftlog.topics.records_tx import decode_any_entry
from raftlog.topics.stamp import stamp_append_time

KIB = 1024
LIMIT = 64 * KIB


@pytest.fixture
def machine(tmp_path: Path, log: Log) -> Iterator[TopicStateMachine]:
    log.create("jobs")
    m = TopicStateMachine(tmp_path / "m", log.store)
    yield m
    m.close()


def _kill(log: Log, machine: TopicStateMachine, indexes: list[int], reason: str = "x") -> None:
    """The records at ``indexes`` (one each, at position 0) leased once and nacked: dead
    (``max_deliveries`` 1)."""
    log.group("create", "q", {"mode": "queue", "topics": ["jobs"], "options": {
        "max_deliveries": 1, "dead_letter": "dlq"}})
    log.group("lease", "q", {"member": "m", "max": len(indexes)})
    ids = [["jobs", index, 0] for index in indexes]
    log.group("nack", "q", {"member": "m", "ids": ids, "reason": reason})
    log.apply(machine)
    assert len(machine.groups.table.groups["q"].dead) == len(indexes)


def _move_all(log: Log, machine: TopicStateMachine, limit: int = LIMIT) -> list[bytes]:
    """Run the mover, appending and applying what it proposes, until no record is dead (or
    it proposes nothing); what it proposed."""
    proposed: list[bytes] = []

    def propose(_request_id: bytes, data: bytes) -> int:
        proposed.append(data)
        return log.add(stamp_append_time(data, log.now))

    mover = DeadLetters(machine, propose, lambda: True, max_data=limit)
    for _ in range(20):
        before = len(proposed)
        mover.on_timer()
        log.apply(machine)
        if not machine.groups.table.groups["q"].dead or len(proposed) == before:
            break
    return proposed


def _batches(proposed: list[bytes]) -> list[RecordBatch]:
    decoded = [decode_any_entry(data) for data in proposed]
    return [entry for entry in decoded if isinstance(entry, RecordBatch)]


def _copies(machine: TopicStateMachine) -> list[Record]:
    return [item.record for item in machine.read(rpc.ReadRequest("dlq", 0)).records]


def test_a_publish_holds_fewer_records_until_it_fits(log: Log, machine: TopicStateMachine) -> None:
    indexes = [log.publish(Record("jobs", bytes([n]) * (20 * KIB))) for n in range(6)]
    _kill(log, machine, indexes)
    proposed = _move_all(log, machine)
    assert all(len(data) <= LIMIT for data in proposed)
    assert [len(b.records) for b in _batches(proposed)] == [3, 3]  # not 6 x 20 KiB at once
    copies = _copies(machine)
    assert [r.value for r in copies] == [bytes([n]) * (20 * KIB) for n in range(6)]  # once each
    assert not any("raftlog-dlq-omitted" in r.headers for r in copies)
    assert not machine.groups.table.groups["q"].dead


def test_a_record_as_large_as_its_entry_is_copied_without_its_value(
    log: Log, machine: TopicStateMachine
) -> None:
    original = Record("jobs", b"v" * (LIMIT - 64), b"key", {"h": b"1"})
    assert len(encode_records([original])) <= LIMIT  # its own entry fits
    first = log.publish(original)
    second = log.publish(Record("jobs", b"small"))
    _kill(log, machine, [first, second])
    proposed = _move_all(log, machine)
    assert all(len(data) <= LIMIT for data in proposed)
    slim, whole = _copies(machine)
    assert (slim.value, whole.value) == (b"", b"small")
    assert slim.headers["raftlog-dlq-omitted"] == b"value"
    assert slim.headers["raftlog-dlq-id"] == f"{first}:0".encode()
    assert slim.key == b"key" and slim.headers["h"] == b"1"  # what fits is kept
    assert "raftlog-dlq-omitted" not in whole.headers
    assert not machine.groups.table.groups["q"].dead


def test_large_keys_headers_and_reasons_are_left_out_too(
    log: Log, machine: TopicStateMachine
) -> None:
    original = Record("jobs", b"v", b"k" * (LIMIT // 2), {"h": b"x" * (LIMIT // 2 - 600)})
    assert len(encode_records([original])) <= LIMIT  # its own entry fits
    index = log.publish(original)
    _kill(log, machine, [index], reason="r" * 1024)
    proposed = _move_all(log, machine)
    assert all(len(data) <= LIMIT for data in proposed)
    (copy,) = _copies(machine)
    assert copy.headers["raftlog-dlq-omitted"] == b"value,key,headers,reason"
    assert copy.key is None and "h" not in copy.headers and copy.value == b""
    assert copy.headers["raftlog-dlq-reason"] == b"r" * REASON_KEPT


def test_the_dead_letter_topics_record_limit_is_met(log: Log, machine: TopicStateMachine) -> None:
    log.create("dlq", max_record_bytes=2 * KIB)
    first = log.publish(Record("jobs", b"a" * (4 * KIB)))
    second = log.publish(Record("jobs", b"b" * 100))
    _kill(log, machine, [first, second])
    _move_all(log, machine)
    copies = _copies(machine)
    assert [r.value for r in copies] == [b"", b"b" * 100]
    assert all(r.size <= 2 * KIB for r in copies)
    assert not machine.groups.table.groups["q"].dead


def test_a_limit_no_copy_meets_proposes_nothing(log: Log, machine: TopicStateMachine) -> None:
    index = log.publish(Record("jobs", b"v"))
    _kill(log, machine, [index])
    log.create("dlq")
    log.apply(machine)
    assert _move_all(log, machine, limit=64) == []
    assert len(machine.groups.table.groups["q"].dead) == 1  # still shown, not lost
