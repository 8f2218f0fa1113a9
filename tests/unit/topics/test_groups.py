"""Consumer groups in the topic state machine (issue #27): the stream-group contract
(create, commit, positions, describe, delete), replicated state identical after a restart, a
snapshot restore (also one taken below the applied index) and on every peer."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from raftlog.entry import EntryType, LogEntry
from raftlog.errors import TopicError
from raftlog.storage.memory import MemoryLogStore
from raftlog.topics.client import admin_data, publish_data
from raftlog.topics.groups import wire
from raftlog.topics.groups.client import group_data
from raftlog.topics.groups.codec import decode_group, encode_group
from raftlog.topics.groups.entry import GroupCommand
from raftlog.topics.groups.model import GroupPosition
from raftlog.topics.groups.requests import GROUP_ANSWERS
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.records import Record, RecordFormatError, RecordId
from raftlog.topics.records_tx import decode_any_entry
from raftlog.topics.snapshot import parse_snapshot_sections
from raftlog.topics.stamp import stamp_append_time

T0 = 1_700_000_000_000


def append(store: MemoryLogStore, data: bytes, time_ms: int = T0) -> int:
    index = store.last_index + 1
    stamped = stamp_append_time(data, time_ms)
    store.append(index, [LogEntry(index.to_bytes(12, "big"), EntryType.STATE, 1, stamped)])
    return index


def catch_up(machine: TopicStateMachine, store: MemoryLogStore) -> None:
    lo = machine.last_applied + 1
    if lo <= store.last_index:
        machine.apply(lo, store.raw_entries(lo, store.last_index + 1), 1)


def state(machine: TopicStateMachine) -> dict[str, object]:
    return {n: encode_group(g) for n, g in machine.groups.table.groups.items()}


def setup_log() -> MemoryLogStore:
    store = MemoryLogStore()
    append(store, admin_data("create", "jobs"))
    for n in range(6):
        append(store, publish_data([Record("jobs", f"job-{n}".encode())]))
    return store


def test_group_command_round_trip_and_bad_input() -> None:
    data = group_data("commit", "g1", {"topic": "jobs", "next": [5, 0], "metadata": "m"})
    entry = decode_any_entry(data)
    assert isinstance(entry, GroupCommand)
    assert entry.args == {"topic": "jobs", "next": [5, 0], "metadata": "m", "member": None}
    for op, args in [("nope", {}), ("commit", {"topic": "bad topic", "next": [1, 0]}),
                     ("lease", {"member": "m", "max": 0}), ("ack", {"member": "m", "ids": []}),
                     ("create", {"mode": "queue", "topics": []})]:
        with pytest.raises(TopicError):
            group_data(op, "g", args)  # type: ignore[arg-type]
    garbage = data[:15] + msgpack.packb(["commit", "g", {"topic": 5}])
    with pytest.raises(RecordFormatError):
        decode_any_entry(garbage)


def test_stream_group_commit_describe_delete(tmp_path: Path) -> None:
    store = setup_log()
    created = append(store, group_data("create", "g1", {"mode": "stream", "topics": ["jobs"]}))
    append(store, group_data("commit", "g1", {"topic": "jobs", "next": [4, 0], "metadata": "a",
                                              "member": "m1"}), T0 + 5)
    machine = TopicStateMachine(tmp_path / "a", store)
    catch_up(machine, store)
    info = machine.groups.table.info("g1", machine.last_applied, machine.groups.source)
    assert info.created_index == created and info.mode == "stream"
    assert info.positions == {"jobs": GroupPosition(RecordId(4, 0), "a", T0 + 5, "m1")}
    frames = GROUP_ANSWERS[wire.TYPE_GROUP_DESCRIBE](machine, [b"g1"])
    assert wire.decode_info(frames) == info
    # a second commit sets (a rewind is allowed); delete removes everything
    append(store, group_data("commit", "g1", {"topic": "jobs", "next": [2, 0]}), T0 + 6)
    catch_up(machine, store)
    assert machine.groups.table.groups["g1"].positions["jobs"].next_record == RecordId(2, 0)
    append(store, group_data("delete", "g1"))
    catch_up(machine, store)
    assert machine.groups.table.groups == {}
    with pytest.raises(TopicError, match="does not exist"):
        GROUP_ANSWERS[wire.TYPE_GROUP_DESCRIBE](machine, [b"g1"])
        raise AssertionError("describe of a deleted group answered")


def test_gate_checks_refuse_what_apply_would_ignore(tmp_path: Path) -> None:
    store = setup_log()
    append(store, group_data("create", "g1", {"mode": "stream", "topics": ["jobs"]}))
    machine = TopicStateMachine(tmp_path / "a", store)
    catch_up(machine, store)
    def refusal(op: str, group: str, args: dict[str, object] | None = None) -> str | None:
        command = decode_any_entry(group_data(op, group, args))  # type: ignore[arg-type]
        assert isinstance(command, GroupCommand)
        error = machine.groups.table.check(command)
        return None if error is None else error.name

    queue = {"mode": "queue", "topics": ["jobs"]}
    assert refusal("create", "g1", queue) == "GroupExists"
    assert refusal("create", "g1", {**queue, "exist_ok": True}) is None
    assert refusal("delete", "g2") == "UnknownGroup"
    assert refusal("lease", "g1", {"member": "m", "max": 1}) == "WrongGroupMode"
    assert refusal("commit", "g1", {"topic": "other", "next": [1, 0]}) == "UnknownTopic"
    assert refusal("commit", "g1", {"topic": "jobs", "next": [1, 0]}) is None


def test_groups_survive_restart_and_snapshots_below_applied(tmp_path: Path) -> None:
    """A snapshot is taken below the first retained record (the log is never compacted past
    one), while the machine has applied further: the groups section is as of the applied
    index, and the restoring peer skips the group commands it already holds."""
    store = MemoryLogStore()
    append(store, admin_data("create", "jobs"))
    append(store, group_data("create", "s", {"mode": "stream", "topics": ["jobs"]}))
    snap_at = append(store, group_data("create", "q", {
        "mode": "queue", "topics": ["jobs"],
        "options": {"ack_wait_ms": 100, "max_deliveries": 2, "dead_letter": "dlq"}}))
    for n in range(6):
        append(store, publish_data([Record("jobs", f"job-{n}".encode())]))
    append(store, group_data("commit", "s", {"topic": "jobs", "next": [6, 0]}), T0 + 1)
    append(store, group_data("lease", "q", {"member": "m1", "max": 3}), T0 + 2)
    machine = TopicStateMachine(tmp_path / "a", store)
    catch_up(machine, store)
    append(store, group_data("ack", "q", {"member": "m1", "ids": [["jobs", 4, 0]]}), T0 + 3)
    append(store, group_data("lease", "q", {"member": "m2", "max": 2}), T0 + 4)
    catch_up(machine, store)
    snapshot = machine.snapshot(snap_at)  # taken while the machine is further ahead
    _, _, _, sections = parse_snapshot_sections(snapshot)
    assert set(sections) == {"groups"}
    # the rest of the log: leases expire by the log clock, one more commit
    append(store, group_data("commit", "s", {"topic": "jobs", "next": [8, 0]}), T0 + 500)
    append(store, group_data("lease", "q", {"member": "m2", "max": 5}), T0 + 600)
    append(store, publish_data([Record("jobs", b"late")]), T0 + 601)
    append(store, group_data("lease", "q", {"member": "m3", "max": 5}), T0 + 602)
    catch_up(machine, store)
    expected = state(machine)
    assert expected["q"]["stats"] == [11, 1, 4, 0]  # delivered, acked, redelivered, dead

    restored = TopicStateMachine(tmp_path / "b", store)
    restored.restore(snap_at, 1, snapshot)
    catch_up(restored, store)
    assert state(restored) == expected

    machine.close()
    reopened = TopicStateMachine(tmp_path / "a", store)
    assert state(reopened) == expected
    for step in (1, 2, 3, 5):  # another peer applying the same log in other batches
        other = TopicStateMachine(tmp_path / f"c{step}", store)
        while other.last_applied < store.last_index:
            lo = other.last_applied + 1
            other.apply(lo, store.raw_entries(lo, min(lo + step, store.last_index + 1)), 1)
        assert state(other) == expected
        other.close()
    for m in (restored, reopened):
        m.close()


def test_codec_round_trip_and_old_snapshots(tmp_path: Path) -> None:
    store = setup_log()
    append(store, group_data("create", "q", {"mode": "queue", "pattern": "jo*"}))
    append(store, group_data("lease", "q", {"member": "m1", "max": 2}), T0 + 1)
    append(store, group_data("nack", "q", {"member": "m1", "ids": [["jobs", 2, 0]],
                                           "reason": "bad"}), T0 + 2)
    machine = TopicStateMachine(tmp_path / "a", store)
    catch_up(machine, store)
    group = machine.groups.table.groups["q"]
    assert decode_group(encode_group(group)) == group
    assert group.waiting == {("jobs", RecordId(2, 0)): (1, "bad")}
    old = msgpack.packb({"v": 3, "topics": {}, "time": 5})
    assert parse_snapshot_sections(old)[3] == {}
    machine.close()
