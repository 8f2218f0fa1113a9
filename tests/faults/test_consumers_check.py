"""The consumer-group history checker (``faults.consumers``, issue #27): a clean history
passes; a peer that serves other group state, or a log where a record is handed out past
``max_deliveries``, fails (negative controls)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from faults.consumers import check_groups
from raftlog.entry import EntryType, LogEntry
from raftlog.storage.memory import MemoryLogStore
from raftlog.topics.client import admin_data, publish_data
from raftlog.topics.groups import table
from raftlog.topics.groups.client import group_data
from raftlog.topics.groups.model import GroupStats
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.records import Record
from raftlog.topics.stamp import stamp_append_time

T0 = 1_700_000_000_000


def history() -> dict[int, LogEntry]:
    steps: list[tuple[bytes, int]] = [(admin_data("create", "jobs"), T0)]
    steps += [(publish_data([Record("jobs", b"j%d" % n)]), T0) for n in range(6)]
    steps += [
        (group_data("create", "q", {"mode": "queue", "topics": ["jobs"],
                                    "options": {"ack_wait_ms": 100, "max_deliveries": 2}}), T0),
        (group_data("lease", "q", {"member": "a", "max": 4}), T0 + 1),
        (group_data("ack", "q", {"member": "a", "ids": [["jobs", 2, 0], ["jobs", 3, 0]]}), T0 + 2),
        (group_data("lease", "q", {"member": "b", "max": 9}), T0 + 200),  # a's 2 expired
        (group_data("ack", "q", {"member": "b", "ids": [["jobs", 4, 0]]}), T0 + 201),
        (group_data("ack", "q", {"member": "a", "ids": [["jobs", 2, 0]]}), T0 + 202),  # again
    ]
    return {
        i: LogEntry(i.to_bytes(12, "big"), EntryType.STATE, 1, stamp_append_time(data, t))
        for i, (data, t) in enumerate(steps, start=1)
    }


def served(log: dict[int, LogEntry], tmp: Path) -> dict[str, object]:
    store = MemoryLogStore()
    for index in sorted(log):
        store.append(index, [log[index]])
    peer = TopicStateMachine(tmp, store)
    peer.apply(1, store.raw_entries(1, store.last_index + 1), 1)
    info = peer.groups.table.info("q", peer.last_applied, peer.groups.source)
    peer.close()
    return {"q": info}


def test_a_clean_history_passes_and_a_divergent_peer_fails(tmp_path: Path) -> None:
    log = history()
    good = served(log, tmp_path / "p1")
    report = check_groups(log, {"1": good, "2": good})  # type: ignore[dict-item]
    assert report.valid, report
    info = good["q"]
    wrong = {"q": replace(info, stats=GroupStats(99, 0, 0, 0))}  # type: ignore[type-var]
    bad = check_groups(log, {"1": good, "2": wrong})  # type: ignore[dict-item]
    assert bad.diverged and not bad.valid


def test_a_record_acked_twice_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: a table that counts a late ack but keeps the record waiting (a
    bug) redelivers it and counts its ack twice; the checker's replay sees it."""

    def buggy_ack(self: object, group: table.Group, member: str, ids: list[list[object]]) -> None:
        for item in ids:
            key = table.topic_record(item)  # type: ignore[arg-type]
            lease = group.leases.get(key)
            if lease is not None and lease.member == member:
                del group.leases[key]
                group.count(acked=1)
            elif key in group.waiting:
                group.count(acked=1)  # the bug: it stays waiting

    ids = [["jobs", 2, 0], ["jobs", 3, 0]]
    steps: list[tuple[bytes, int]] = [
        (admin_data("create", "jobs"), T0),
        (publish_data([Record("jobs", b"a")]), T0),
        (publish_data([Record("jobs", b"b")]), T0),
        (group_data("create", "q", {"mode": "queue", "topics": ["jobs"],
                                    "options": {"ack_wait_ms": 100}}), T0),
        (group_data("lease", "q", {"member": "a", "max": 2}), T0 + 1),
        (group_data("ack", "q", {"member": "a", "ids": ids}), T0 + 200),  # late: expired
        (group_data("lease", "q", {"member": "b", "max": 2}), T0 + 201),
        (group_data("ack", "q", {"member": "b", "ids": ids}), T0 + 202),
    ]
    log = {
        i: LogEntry(i.to_bytes(12, "big"), EntryType.STATE, 1, stamp_append_time(data, t))
        for i, (data, t) in enumerate(steps, start=1)
    }
    assert check_groups(log, {}).valid  # the real rules: each record acked once
    monkeypatch.setattr(table.GroupTable, "_ack", buggy_ack)
    report = check_groups(log, {})
    assert report.unbalanced and not report.valid, report


def test_a_record_lost_by_an_ack_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: an ack that also drops another record the member holds (a bug: that
    record is never acked, redelivered or dead-lettered) is caught as lost."""
    real_ack = table.GroupTable._ack

    def losing_ack(self: table.GroupTable, group: table.Group, member: str,
                   ids: list[list[object]]) -> None:
        real_ack(self, group, member, ids)  # type: ignore[arg-type]
        for key, lease in list(group.leases.items()):
            if lease.member == member:
                del group.leases[key]  # the bug
                return

    log = history()
    assert check_groups(log, {}).valid
    monkeypatch.setattr(table.GroupTable, "_ack", losing_ack)
    report = check_groups(log, {})
    assert report.lost and not report.valid, report
