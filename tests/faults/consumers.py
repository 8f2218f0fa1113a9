"""The history checker for consumer groups (issue #27): did every peer end with the groups
the committed log says, and did the queue rules hold?

Input: the committed log (``history.committed_log``, starting at index 1: a run without
compaction) and, per peer, the groups it serves (``GD`` answers, gathered after the faults
healed and every peer applied the same index). The log is replayed through a fresh topic
state machine -- the model -- and:

* **diverged** -- a peer's group (positions, queue standing, members, counters) differs
  from the model's at the same log: the group state is not the log's;
* **over-delivered** -- a lease in the model with more deliveries than ``max_deliveries``;
* **double-acked** -- a record an ack command removed while it was already done (acked
  twice: counted by replaying the acks against the model step by step);
* **unbalanced** -- a queue group whose acked + dead-lettered + open records do not add up
  to the records it ever took from its topics;
* **lost** -- a record that left a queue group's open set (leased, waiting, dead, or not
  reached yet) at an entry that does not account for it: only an ack or a ``dead`` move
  naming it, a reset or delete of the group, or a topic command (retention, deletion) may.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from faults.cluster import IDENT, FaultCluster
from faults.history import Report
from raftlog.client import RaftClient
from raftlog.entry import LogEntry
from raftlog.errors import TopicError
from raftlog.storage.memory import MemoryLogStore
from raftlog.topics.client import TopicClient
from raftlog.topics.groups.entry import GroupCommand
from raftlog.topics.groups.model import GroupInfo
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.records import RecordId, TopicCommand
from raftlog.topics.records_tx import decode_any_entry


@dataclass
class GroupReport:
    diverged: list[str] = field(default_factory=list)
    over_delivered: list[str] = field(default_factory=list)
    double_acked: list[str] = field(default_factory=list)
    unbalanced: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not (self.diverged or self.over_delivered or self.double_acked
                    or self.unbalanced or self.lost)


def _comparable(info: GroupInfo) -> GroupInfo:
    return replace(info, applied=0)


def check_groups(
    log: Mapping[int, LogEntry], served: Mapping[str, Mapping[str, GroupInfo]]
) -> GroupReport:
    """``served``: peer -> group name -> what that peer answered (module docstring)."""
    report = GroupReport()
    store = MemoryLogStore()
    for index in sorted(log):
        store.append(index, [log[index]])
    with tempfile.TemporaryDirectory() as tmp:
        model = TopicStateMachine(Path(tmp) / "model", store)
        try:
            done: dict[str, set[tuple[str, RecordId]]] = {}
            for index in range(1, store.last_index + 1):
                before = {n: _open(model, n) for n in model.groups.table.groups}
                acked_before = {n: g.stats.acked for n, g in model.groups.table.groups.items()}
                dead_before = {n: g.stats.dead_lettered
                               for n, g in model.groups.table.groups.items()}
                model.apply(index, store.raw_entries(index, index + 1), 1)
                for name, group in model.groups.table.groups.items():
                    gone = before.get(name, set()) - _open(model, name)
                    again = gone & done.setdefault(name, set())
                    if again:
                        report.double_acked.append(f"{name}: {sorted(again)[:5]} at {index}")
                    done[name] |= gone
                    unexplained = gone - _accounted(log[index].data, name)
                    if group.options.dead_letter is None:  # dead without a topic: dropped
                        dropped = group.stats.dead_lettered - dead_before.get(name, 0)
                        unexplained = set(sorted(unexplained)[dropped:])
                    if unexplained:
                        report.lost.append(f"{name}: {sorted(unexplained)[:5]} at {index}")
                    if group.stats.acked < acked_before.get(name, 0):
                        report.double_acked.append(f"{name}: acked went down at {index}")
            applied = model.last_applied
            for name, group in model.groups.table.groups.items():
                for (topic, rid), lease in group.leases.items():
                    if lease.deliveries > group.options.max_deliveries:
                        report.over_delivered.append(f"{name}: {topic} {rid} {lease.deliveries}")
                if group.mode == "queue":
                    s = group.stats
                    taken = s.delivered - s.redelivered
                    open_ = len(group.leases) + len(group.waiting) + len(group.dead)
                    if s.acked + s.dead_lettered + open_ != taken:
                        report.unbalanced.append(
                            f"{name}: acked {s.acked} + dead {s.dead_lettered} + open {open_} "
                            f"!= taken {taken}")
                expected = _comparable(model.groups.table.info(name, applied,
                                                                model.groups.source))
                for peer, groups in served.items():
                    got = groups.get(name)
                    if got is None or _comparable(got) != expected:
                        report.diverged.append(f"{peer}: {name}: {got} != {expected}")
        finally:
            model.close()
    return report


def _accounted(data: bytes, name: str) -> set[tuple[str, RecordId]] | _Every:
    """The records of group ``name`` an entry may take out of its open set."""
    try:
        entry = decode_any_entry(data)
    except TopicError:
        return set()
    if isinstance(entry, TopicCommand):
        return _Every()
    if not isinstance(entry, GroupCommand) or entry.group != name:
        return set()
    if entry.op in ("reset", "delete"):
        return _Every()
    if entry.op in ("ack", "dead"):
        return {(str(t), RecordId(int(i), int(p))) for t, i, p in entry.args.get("ids", [])}
    return set()


class _Every:
    """Accounts for any record (``gone - _Every()`` is empty)."""

    def __rsub__(self, other: set[tuple[str, RecordId]]) -> set[tuple[str, RecordId]]:
        return set()


def _open(model: TopicStateMachine, name: str) -> set[tuple[str, RecordId]]:
    """Records a queue group holds (leased, waiting, dead) or has not reached yet."""
    group = model.groups.table.groups.get(name)
    if group is None or group.mode != "queue":
        return set()
    out = set(group.leases) | set(group.waiting) | set(group.dead)
    for topic in group.resolved(model.groups.source.topic_names()):
        cursor = group.cursors.get(topic, RecordId(0, 0))
        out |= {(topic, rid) for rid in model.groups.source.record_ids(topic, cursor, 1 << 20)}
    return out


async def served_groups(
    cluster: FaultCluster, ids: Sequence[str], timeout: float = 30.0
) -> tuple[int, dict[str, Mapping[str, GroupInfo]]]:
    """Every group as each peer serves it (``GD``), once all of them answer at the same
    applied index; returns that index too (the log the checker replays ends there)."""
    deadline = time.monotonic() + timeout
    async with RaftClient(cluster.urls, IDENT, timeout=10.0) as raft, TopicClient(raft) as tc:
        while True:
            names = await tc.list_groups(url=cluster.direct_url(ids[0]))
            served = {
                peer: {n: await tc.describe_group(n, url=cluster.direct_url(peer)) for n in names}
                for peer in ids
            }
            applied = {info.applied for groups in served.values() for info in groups.values()}
            if len(applied) <= 1:
                return (applied.pop() if applied else 0), served
            if time.monotonic() > deadline:
                raise AssertionError(f"the peers' groups never settled: applied {applied}")
            await asyncio.sleep(0.2)


def record_problems(groups: GroupReport, report: Report) -> None:
    """The group checker's findings as violations of the run's report (``faults.history``):
    diverged state is divergence, a record handed out or acked too often a duplicate, a
    record unaccounted for lost."""
    for kind, problems in (("divergent", groups.diverged), ("duplicated", groups.over_delivered),
                           ("duplicated", groups.double_acked), ("lost", groups.unbalanced),
                           ("lost", groups.lost)):
        for problem in problems:
            report.add(kind, f"group {problem}")
