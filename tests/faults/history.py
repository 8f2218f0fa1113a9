"""The history checker: did the cluster keep the log's promises through the faults?

Inputs, all gathered after the faults are healed and the cluster has quiesced:

* ``ops``: every proposal the clients made (``Op``: request id, data, when invoked, when
  answered, outcome ``ok(index)`` / ``fail`` / ``info`` (unknown: timed out));
* ``peers``: every peer's final log (``PeerLog``: entries read from its data directory with
  the storage API, and its commit index);
* ``topic_reads``: per peer, the records it serves for one topic (``TopicRead``).

Because the log is totally ordered and indexes are assigned by the leader, linearizability of
appends reduces to index checks (no search needed); the checks run in O(n log n):

* **lost** — an acknowledged op whose request id is not in the committed log (durability);
* **duplicated** — a request id committed at more than one index (exactly-once by request id,
  across the client's retries and leader changes);
* **divergent** — an index whose committed entry differs between two peers, or an ack whose
  index holds some other entry (agreement: every peer, every ack say the same);
* **order** — one client's acks out of index order, or A acked before B was invoked yet
  ``index(A) > index(B)`` (real-time order = ack order);
* **unexpected** — a committed STATE entry no client proposed (phantom), or one whose
  proposal was definitely refused;
* **topic** — a peer's topic read differs from the topic's records in the log (within
  retention);
* **lagging** — a member whose stored log does not reach the commit index all members
  reported together before they stopped (``agreed``), or else the others' (no convergence);
* ``unacked_landed`` (not a violation) — ops answered ``info``/``fail`` whose entry is in the
  log anyway: a timed-out write may land, exactly once.

``Report.valid`` is true when every violation list is empty. Offline reading of a peer's log
is in ``read_peer_log``; collection from a live cluster is in ``faults.schedule``.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from raftlog.entry import EntryType, LogEntry
from raftlog.storage.rocks import open_storage
from raftlog.topics.record_decode import decode_entry
from raftlog.topics.records import RecordBatch
from raftlog.topics.records_tx import decode_any_entry

EXAMPLES = 20
"""Examples kept per violation class in a report."""


@dataclass
class Op:
    """One logical proposal by one client (retries of the same request id included)."""

    client: str
    seq: int
    request_id: bytes
    data: bytes
    invoke_t: float
    complete_t: float | None = None
    outcome: str = "info"
    """``ok`` (acknowledged at ``index``), ``fail`` (definitely not applied) or ``info``."""
    index: int | None = None
    attempts: int = 1


@dataclass
class PeerLog:
    """A peer's final log: ``entries[i]`` for ``first_index <= i <= last index``."""

    peer: str
    commit_index: int
    first_index: int
    entries: dict[int, LogEntry]
    member: bool = True
    """False for a peer removed from the cluster: it need not have caught up."""


@dataclass(frozen=True)
class TopicRow:
    index: int
    position: int
    value: bytes


@dataclass
class TopicRead:
    """What one peer served for ``topic`` (every page), up to its applied index."""

    peer: str
    topic: str
    applied: int
    rows: list[TopicRow]
    read_time_ms: int = 0
    retention_ms: int | None = None


@dataclass
class Report:
    acked: int = 0
    unverified: int = 0
    """Acks and topic records of indexes every peer has compacted away (nothing left to
    compare them with)."""
    ops: int = 0
    committed: int = 0
    unacked_landed: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    divergent: list[str] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    topic: list[str] = field(default_factory=list)
    lagging: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    VIOLATIONS = ("lost", "duplicated", "divergent", "order", "unexpected", "topic", "lagging")

    def add(self, kind: str, example: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        examples: list[str] = getattr(self, kind)
        if len(examples) < EXAMPLES:
            examples.append(example)

    def count(self, kind: str) -> int:
        return self.counts.get(kind, 0)

    @property
    def valid(self) -> bool:
        return not any(self.count(kind) for kind in self.VIOLATIONS)

    def summary(self) -> str:
        parts = [
            f"ops={self.ops}",
            f"acked={self.acked}",
            f"unverified={self.unverified}",
            f"committed={self.committed}",
            f"unacked_landed={self.unacked_landed}",
        ]
        parts += [f"{kind}={self.count(kind)}" for kind in self.VIOLATIONS]
        lines = [" ".join(parts)]
        for kind in self.VIOLATIONS:
            for example in getattr(self, kind):
                lines.append(f"  {kind}: {example}")
        return "\n".join(lines)


def read_peer_log(peer: str, data_dir: Path, commit_index: int | None = None) -> PeerLog:
    """A stopped (or running: read-only, no lock) peer's log from its data directory.
    ``commit_index`` defaults to the persisted applied index (the peer applies only
    committed entries, so everything up to it is committed)."""
    log, hard_state, snapshots = open_storage(data_dir, read_only=True)
    try:
        applied = hard_state.load().last_applied
        first, last = log.first_index, log.last_index
        entries: dict[int, LogEntry] = {}
        index = first
        while index <= last:
            batch = log.entries(index, last + 1, max_bytes=4 << 20)
            for entry in batch:
                entries[index] = entry
                index += 1
        commit = applied if commit_index is None else max(commit_index, applied)
        return PeerLog(peer, min(commit, last), first, entries)
    finally:
        log.close()
        hard_state.close()
        snapshots.close()


def payload(entry: LogEntry) -> bytes:
    """What the client proposed: the data, or for a one-record topic entry the record's
    value (the leader stamps its append time into the entry)."""
    try:
        decoded = decode_entry(entry.data) if entry.entry_type == EntryType.STATE else None
    except ValueError:
        decoded = None
    if isinstance(decoded, RecordBatch) and len(decoded.records) == 1:
        return decoded.records[0].value
    return entry.data


def _cluster_entry(entry: LogEntry) -> bool:
    """A topic entry that is not records: a clock tick the leader proposes itself, a topic's
    creation by the schedule's set-up, a transaction's step (no client op of this history;
    ``faults.transactions`` checks those)."""
    try:
        decoded = decode_any_entry(entry.data)
    except ValueError:
        return False
    return decoded is not None and not isinstance(decoded, RecordBatch)


def _describe(entry: LogEntry) -> str:
    return f"t{entry.term}/{entry.request_id.hex()}/{entry.data[:40]!r}"


def committed_log(peers: Sequence[PeerLog], report: Report) -> dict[int, LogEntry]:
    """The committed log as every peer that has committed each index agrees it is; every
    disagreement is a divergence."""
    top = max((p.commit_index for p in peers), default=0)
    log: dict[int, LogEntry] = {}
    for index in range(1, top + 1):
        holders = [
            (p.peer, p.entries[index])
            for p in peers
            if p.commit_index >= index and index in p.entries
        ]
        if not holders:
            continue  # compacted on every peer that committed it
        first_peer, entry = holders[0]
        for other_peer, other in holders[1:]:
            if other != entry:
                report.add(
                    "divergent",
                    f"index {index}: peer {first_peer} has {_describe(entry)}, "
                    f"peer {other_peer} has {_describe(other)}",
                )
        log[index] = entry
    return log


def check(
    ops: Iterable[Op],
    peers: Sequence[PeerLog],
    topic_reads: Sequence[TopicRead] = (),
    *,
    converged: bool = True,
    agreed: int | None = None,
) -> Report:
    """Check the promises (module docstring). ``converged``: every peer in ``peers`` should
    have reached the same commit index (true after healing and quiescing). ``agreed``: the
    commit index every member reported at once while running (``wait_converged``); each
    member's stored log must then reach it. Entries committed after that moment (a cluster
    clock tick while the peers stop one by one) may reach some peers only -- an idle
    follower learns a commit index on the leader's next tick -- so without ``agreed`` the
    highest stored commit index is the mark, as for logs read from peers stopped at once."""
    ops = list(ops)
    report = Report(ops=len(ops))
    if converged and peers:
        top = agreed if agreed is not None else max(p.commit_index for p in peers)
        for p in peers:
            if p.member and p.commit_index < top:
                report.add("lagging", f"peer {p.peer} committed {p.commit_index} < {top}")
    log = committed_log(peers, report)
    report.committed = len(log)
    # Indexes no peer holds any more (compaction): losses and duplicates there are invisible
    # to this checker; such acks are counted as unverified.
    compacted = min((p.first_index for p in peers), default=1) - 1

    where: dict[bytes, list[int]] = defaultdict(list)
    for index, entry in log.items():
        if entry.entry_type == EntryType.STATE:
            where[entry.request_id].append(index)
    by_id = {op.request_id: op for op in ops}

    for rid, indexes in where.items():
        if len(indexes) > 1:
            op = by_id.get(rid)
            name = f"{op.client}#{op.seq}" if op else "?"
            report.add("duplicated", f"request {rid.hex()} ({name}) at indexes {indexes}")
        if rid not in by_id and not _cluster_entry(log[indexes[0]]):
            report.add("unexpected", f"index {indexes[0]}: {_describe(log[indexes[0]])}")

    for op in ops:
        landed = where.get(op.request_id, [])
        if op.outcome != "ok":
            report.unacked_landed += bool(landed)
            if op.outcome == "fail" and landed:
                report.add("unexpected", f"{op.client}#{op.seq} was refused but is at {landed}")
            continue
        report.acked += 1
        if not landed and op.index is not None and op.index <= compacted:
            report.unverified += 1
            continue
        if not landed:
            report.add(
                "lost",
                f"{op.client}#{op.seq} acked at index {op.index}, "
                f"request {op.request_id.hex()} not in the committed log",
            )
            continue
        entry = log.get(op.index) if op.index is not None else None
        if op.index not in landed or entry is None or payload(entry) != op.data:
            got = _describe(entry) if entry is not None else "nothing"
            report.add(
                "divergent",
                f"{op.client}#{op.seq} acked at index {op.index}, which "
                f"holds {got}; its request is at {landed}",
            )
    _check_order(ops, report)
    own_floor = {p.peer: p.first_index - 1 for p in peers}
    for read in topic_reads:
        # A peer serves the records of its own log: what it compacted is gone from its reads
        # (and from the comparison), what every peer compacted cannot be compared any more.
        floor = max(compacted, own_floor.get(read.peer, 0))
        visible = [row for row in read.rows if row.index > floor]
        report.unverified += len(read.rows) - len(visible)
        _check_topic(replace(read, rows=visible), log, report, floor)
    return report


def _check_order(ops: Sequence[Op], report: Report) -> None:
    acked = [op for op in ops if op.outcome == "ok" and op.index is not None]
    per_client: dict[str, list[Op]] = defaultdict(list)
    for op in sorted(acked, key=lambda o: (o.client, o.seq)):
        per_client[op.client].append(op)
    for client, seq in per_client.items():
        for a, b in itertools.pairwise(seq):
            if a.index is not None and b.index is not None and a.index >= b.index:
                report.add(
                    "order",
                    f"client {client}: #{a.seq} at {a.index} but later #{b.seq} at {b.index}",
                )
    # Real time: if A completed before B was invoked, index(A) < index(B). Sweep B by
    # invocation time, keeping the highest index of all ops completed before it.
    by_completion = sorted(acked, key=lambda o: o.complete_t or 0.0)
    completions = [o.complete_t or 0.0 for o in by_completion]
    running_max: list[tuple[int, Op]] = []
    best: tuple[int, Op] | None = None
    for op in by_completion:
        assert op.index is not None
        if best is None or op.index > best[0]:
            best = (op.index, op)
        running_max.append(best)
    for b in acked:
        k = bisect.bisect_left(completions, b.invoke_t)
        if k and b.index is not None and running_max[k - 1][0] > b.index:
            top_index, a = running_max[k - 1]
            if a.client != b.client:  # same-client cases were reported above
                report.add(
                    "order",
                    f"{a.client}#{a.seq} acked at {top_index} before "
                    f"{b.client}#{b.seq} was sent, which got {b.index}",
                )


def topic_rows(log: Mapping[int, LogEntry], topic: str, upto: int) -> list[TopicRow]:
    """The records of ``topic`` in the log up to index ``upto``, in record-id order."""
    rows: list[TopicRow] = []
    for index in sorted(i for i in log if i <= upto):
        entry = log[index]
        if entry.entry_type != EntryType.STATE:
            continue
        try:
            decoded = decode_entry(entry.data)
        except ValueError:
            continue  # refused at apply: not a record
        if isinstance(decoded, RecordBatch):
            rows += [
                TopicRow(index, pos, r.value)
                for pos, r in enumerate(decoded.records)
                if r.topic == topic
            ]
    return rows


def _append_times(log: Mapping[int, LogEntry]) -> dict[int, int]:
    out: dict[int, int] = {}
    for index, entry in log.items():
        try:
            decoded = decode_entry(entry.data) if entry.entry_type == EntryType.STATE else None
        except ValueError:
            continue
        if isinstance(decoded, RecordBatch):
            out[index] = decoded.append_time_ms
    return out


def _check_topic(
    read: TopicRead, log: Mapping[int, LogEntry], report: Report, floor: int = 0
) -> None:
    expected = [r for r in topic_rows(log, read.topic, read.applied) if r.index > floor]
    if read.retention_ms is not None:
        # Records within a second of expiring may or may not be served yet: compare only
        # those clearly inside the retention window, and never accept a phantom.
        times = _append_times(log)
        horizon = read.read_time_ms - read.retention_ms + 1000
        expected = [r for r in expected if times.get(r.index, 0) >= horizon]
        served = {(r.index, r.position): r for r in read.rows}
        for row in expected:
            if (row.index, row.position) not in served:
                report.add("topic", f"peer {read.peer} topic {read.topic}: missing {row}")
        expected_all = {(r.index, r.position): r for r in topic_rows(log, read.topic, read.applied)}
        for key, row in served.items():
            if expected_all.get(key) != row:
                report.add(
                    "topic",
                    f"peer {read.peer} topic {read.topic}: served {row}, "
                    f"log has {expected_all.get(key)}",
                )
        return
    if read.rows != expected:
        missing = [r for r in expected if r not in read.rows][:3]
        extra = [r for r in read.rows if r not in expected][:3]
        report.add(
            "topic",
            f"peer {read.peer} topic {read.topic}: served {len(read.rows)} "
            f"records, log has {len(expected)} (missing {missing}, extra {extra})",
        )
