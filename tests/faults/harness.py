"""Run one fault schedule against a real cluster and check the history it leaves.

Phases (each waits on a condition, never a fixed sleep where one exists):

1. start a ``FaultCluster`` and wait for a stable leader;
2. start the ``Workload``; warm up until ``min_acks_before`` acks (anti-vacuity);
3. run the schedule's fault function until its deadline (it reports what it did in
   ``Chaos.did``, so the test can check the fault really happened);
4. heal everything: proxy rules cleared, paused peers resumed, dead peers restarted, hogs
   stopped, disks freed;
5. wait for ``min_acks_after`` new acks (liveness after healing), stop the workload;
6. wait until every member reports the same commit index, read each peer's topic records
   online, stop the peers cleanly and read every log offline (storage API, read-only);
7. ``faults.history.check``: lost / duplicated / divergent / order / unexpected / topic.

Every run writes ``history.jsonl``, ``report.txt`` and the peers' logs under its directory,
and returns a ``RunResult`` with the figures of the chaos table.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from integration.cluster import wait_for

from faults.cluster import IDENT, FaultCluster
from faults.consumers import check_groups, record_problems, served_groups
from faults.history import (
    Op,
    PeerLog,
    Report,
    TopicRead,
    TopicRow,
    check,
    committed_log,
    read_peer_log,
)
from faults.transactions import TX_TOPIC, check_transactions
from faults.workload import TOPIC, Workload, WorkloadSpec, max_unavailability
from raftlog.client import RaftClient
from raftlog.entry import EntryType, LogEntry
from raftlog.topics.client import TopicClient
from raftlog.topics.groups.model import GroupInfo


@dataclass
class Chaos:
    """What a schedule's fault function gets: the cluster, a seeded RNG, the deadline."""

    cluster: FaultCluster
    workload: Workload
    rng: random.Random
    deadline: float
    did: Counter[str] = field(default_factory=Counter)
    """What the schedule did (``kills``, ``leader_kills``, ``partitions``...): guards."""
    members: list[str] = field(default_factory=list)
    """Peers expected to be in the cluster at the end (a membership change edits it)."""
    down: set[str] = field(default_factory=set)
    """Peers the schedule left stopped on purpose (restarted on heal unless removed)."""
    guards: dict[str, int] = field(default_factory=dict)
    """``did`` counters the run must reach (the schedule's guards): while one is short at the
    deadline, the deadline moves on by ``GUARD_EXTENSION`` (at most ``MAX_EXTENSIONS``
    times), so a short run on a slow machine still does its fault rather than failing its
    guard; counted after the run (``elections``) are not waited for here."""
    extensions: int = 0

    def running(self) -> bool:
        if time.monotonic() < self.deadline:
            return True
        if self.extensions < MAX_EXTENSIONS and self.short_guards():
            self.extensions += 1
            self.deadline = time.monotonic() + GUARD_EXTENSION
            return True
        return False

    def short_guards(self) -> list[str]:
        """The guards the run has not reached yet (those counted during the run)."""
        return [k for k, v in self.guards.items() if k not in AFTER_RUN and self.did[k] < v]

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def pause_for(self, seconds: float) -> None:
        """Let the fault act for ``seconds`` (bounded by the deadline). A fault lasting a
        given time is the one place where waiting on the clock is the condition."""
        time.sleep(max(0.0, min(seconds, self.left())))

    def wait_acks(self, n: int, timeout: float = 20.0) -> None:
        """Wait for ``n`` new acknowledgements (progress between faults)."""
        base = self.workload.acked()
        wait_for(f"{n} acks", lambda: self.workload.acked() >= base + n, timeout, interval=0.05)

    def leader(self, timeout: float = 30.0, exclude: str | None = None) -> str:
        return self.cluster.wait_leader(timeout, exclude)

    def kill(self, peer_id: str) -> None:
        self.cluster.kill(peer_id)
        self.down.add(peer_id)
        self.did["kills"] += 1

    def restart(self, peer_id: str) -> None:
        self.cluster.restart(peer_id)
        self.down.discard(peer_id)


FaultFunction = Callable[[Chaos], None]

GUARD_EXTENSION = 2.0
"""Seconds a run goes on past its deadline while a guard is short (see ``Chaos.guards``)."""
MAX_EXTENSIONS = 15
"""At most this many extensions: a fault that cannot happen still ends the run (and the
test then fails on its unmet guard)."""
AFTER_RUN = frozenset({"elections", "group_acks"})
"""Guards counted after the run, not during it: ``elections`` by the harness, ``group_acks``
by the consumer-group schedule once its load has stopped."""


@dataclass
class RunResult:
    name: str
    seed: int
    duration: float
    report: Report
    elections: int
    max_unavailability: float
    did: dict[str, int]
    directory: Path
    groups: tuple[dict[int, LogEntry], dict[str, Mapping[str, GroupInfo]]] | None = None
    """With ``check_groups``: the log replayed and what each peer served (negative controls)."""

    def row(self) -> dict[str, Any]:
        r = self.report
        return {
            "schedule": self.name,
            "seed": self.seed,
            "seconds": round(self.duration),
            "acked": r.acked,
            "lost": r.count("lost"),
            "duplicated": r.count("duplicated"),
            "expired_early": self.did.get("expired_early", 0) + self.did.get("tx_expired_early", 0),
            "divergent": r.count("divergent"),
            "other": sum(r.count(k) for k in ("order", "unexpected", "topic", "lagging")),
            "elections": self.elections,
            "max_unavail_s": round(self.max_unavailability, 2),
        }


@dataclass
class RunOptions:
    duration: float = 10.0
    ids: Sequence[str] = ("1", "2", "3")
    raft: dict[str, Any] = field(default_factory=dict)
    failpoints: dict[str, str] = field(default_factory=dict)
    """``RAFTLOG_FAILPOINTS`` per peer id (``"*"``: every peer)."""
    spec: WorkloadSpec = field(default_factory=WorkloadSpec)
    min_acks_before: int = 20
    min_acks_after: int = 20
    setup: Callable[[FaultCluster], None] | None = None
    """Runs after the cluster is built and before it starts (e.g. a small disk)."""
    own_entries: Callable[[bytes], bool] | None = None
    """Entry data the schedule proposed itself (e.g. its own topic): known to the checker
    as proposals with no acknowledgement, so they are not phantoms and still counted once."""
    converge_timeout: float = 60.0
    """How long the healed cluster may take to converge before the run fails."""
    converge_give_up: Callable[[], str | None] | None = None
    """Ends the wait for convergence early, with the reason it returns (a negative control
    that already sees why the peers never will; ``FaultCluster.wait_converged``)."""
    topic_retention_ms: int | None = None
    """Create ``TOPIC`` with this time retention before the load (None: auto-created, kept
    forever). A retained record bounds compaction, so compacting schedules set it."""
    check_groups: bool = False
    """Check the consumer groups too (``faults.consumers``): every peer's ``GD`` answers
    against a replay of the committed log (the run must not compact)."""
    guards: dict[str, int] = field(default_factory=dict)
    """The schedule's guards: the run lasts ``duration`` or until they are met, whichever is
    later (bounded; see ``Chaos.guards``)."""


def run_schedule(
    name: str, fault: FaultFunction, directory: Path, seed: int, options: RunOptions
) -> RunResult:
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    with FaultCluster(directory, options.ids, raft=options.raft, seed=seed) as cluster:
        for peer_id in cluster.ids:
            spec = options.failpoints.get(peer_id, options.failpoints.get("*"))
            cluster.set_failpoints(peer_id, spec)
        if options.setup is not None:
            options.setup(cluster)
        cluster.start()
        cluster.peers.wait_stable_leader(30)
        if options.topic_retention_ms is not None:
            asyncio.run(create_topic(cluster, options.topic_retention_ms))
        workload = Workload(cluster.urls, IDENT, options.spec)
        workload.start()
        try:
            wait_for("warm-up acks", lambda: workload.acked() >= options.min_acks_before, 30)
            chaos = Chaos(
                cluster,
                workload,
                rng,
                time.monotonic() + options.duration,
                members=list(cluster.ids),
                guards=dict(options.guards),
            )
            started, elections_before = time.monotonic(), cluster.elections()
            fault(chaos)
            heal(chaos)
            healed = time.monotonic()
            wait_for(
                "acks after healing",
                lambda: workload.acked(since=healed) >= options.min_acks_after,
                60,
            )
        finally:
            workload.stop()
        ended = time.monotonic()
        ops = workload.snapshot()
        elections = cluster.elections() - elections_before
        commit = cluster.wait_converged(
            chaos.members, options.converge_timeout, options.converge_give_up
        )
        served = None
        if options.check_groups:
            group_applied, served = asyncio.run(served_groups(cluster, chaos.members))
            while group_applied > commit:  # a clock tick committed meanwhile
                commit = cluster.wait_converged(chaos.members, options.converge_timeout)
        reads = asyncio.run(read_topic(cluster, chaos.members, options.topic_retention_ms))
        tx_reads = []
        if options.spec.transactors:
            tx_reads = asyncio.run(
                read_topic(cluster, chaos.members, options.topic_retention_ms, TX_TOPIC)
            )
        cluster.peers.stop()
        logs = collect_logs(cluster, chaos.members, commit)
    chaos.did["elections"] = elections
    if options.own_entries is not None:
        ops += schedule_ops(logs, options.own_entries)
    report = check(ops, logs, reads, agreed=commit)
    group_log = None
    if served is not None:
        committed = committed_log(logs, Report())
        group_log = {i: e for i, e in committed.items() if i <= group_applied}
        record_problems(check_groups(group_log, served), report)
    if options.spec.transactors:
        compacted = min((p.first_index for p in logs), default=1) - 1
        committed = committed_log(logs, Report())
        chaos.did.update(check_transactions(workload.txs, committed, compacted, tx_reads, report))
    result = RunResult(
        name,
        seed,
        ended - started,
        report,
        elections,
        max_unavailability(ops, started, ended),
        dict(chaos.did),
        directory,
        (group_log, served) if served is not None and group_log is not None else None,
    )
    write_artifacts(result, ops)
    return result


def schedule_ops(logs: Sequence[PeerLog], own: Callable[[bytes], bool]) -> list[Op]:
    """The schedule's own committed STATE entries as unacknowledged proposals (``info``)."""
    seen: dict[bytes, Op] = {}
    for log in logs:
        for entry in log.entries.values():
            rid = entry.request_id
            if entry.entry_type == EntryType.STATE and own(entry.data) and rid not in seen:
                seen[rid] = Op("schedule", len(seen) + 1, rid, entry.data, 0.0)
    return list(seen.values())


def heal(chaos: Chaos) -> None:
    cluster = chaos.cluster
    cluster.net.heal()
    cluster.stop_hogs()
    for peer_id in cluster.ids:
        cluster.resume(peer_id)
    for peer_id in chaos.members:
        if not cluster.running(peer_id):
            cluster.restart(peer_id)
    chaos.down.clear()


async def create_topic(cluster: FaultCluster, retention_ms: int) -> None:
    """The load's topics (``TOPIC``, ``TX_TOPIC``) with a time retention."""
    async with RaftClient(cluster.urls, IDENT, timeout=15.0) as raft, TopicClient(raft) as topics:
        for topic in (TOPIC, TX_TOPIC):
            await topics.create_topic(topic, retention_ms=retention_ms, exist_ok=True)


async def read_topic(
    cluster: FaultCluster, ids: Sequence[str], retention_ms: int | None = None, topic: str = TOPIC
) -> list[TopicRead]:
    """Every record of ``topic`` as each peer serves it (asked directly, all pages); with
    ``retention_ms``, the peer's log clock too (what the check compares retention with)."""
    out: list[TopicRead] = []
    async with RaftClient(cluster.urls, IDENT, timeout=15.0) as raft, TopicClient(raft) as topics:
        for peer_id in ids:
            url = cluster.direct_url(peer_id)
            rows: list[TopicRow] = []
            applied = 0
            start: tuple[int, int] | None = None
            while True:
                if start is None:
                    page = await topics.read(topic, from_index=0, url=url)
                else:
                    page = await topics.read(
                        topic, from_index=start[0], from_position=start[1], inclusive=False, url=url
                    )
                applied = applied or page.applied
                rows += [TopicRow(r.id.index, r.id.position, r.record.value) for r in page.records]
                if not page.more or not page.records:
                    break
                start = (page.records[-1].id.index, page.records[-1].id.position)
            clock = 0
            if retention_ms is not None:
                clock = (await topics.describe(topic, url=url)).log_clock_ms
            out.append(TopicRead(peer_id, topic, applied, rows, clock, retention_ms))
    return out


def collect_logs(cluster: FaultCluster, members: Sequence[str], commit: int) -> list[PeerLog]:
    logs = []
    for peer_id in cluster.ids:
        data_dir = cluster.peers.peers[peer_id].data_dir
        if not (data_dir / "log" / "CURRENT").exists():
            continue
        member = peer_id in members
        log = read_peer_log(peer_id, data_dir, commit if member else None)
        log.member = member
        logs.append(log)
    return logs


def write_artifacts(result: RunResult, ops: Sequence[Op]) -> None:
    with open(result.directory / "history.jsonl", "w") as f:
        for op in ops:
            f.write(
                json.dumps(
                    {
                        "client": op.client,
                        "seq": op.seq,
                        "request_id": op.request_id.hex(),
                        "data": op.data.decode(errors="replace"),
                        "invoke": op.invoke_t,
                        "complete": op.complete_t,
                        "outcome": op.outcome,
                        "index": op.index,
                        "attempts": op.attempts,
                    }
                )
                + "\n"
            )
    (result.directory / "report.txt").write_text(
        f"{result.name} seed={result.seed} did={result.did} elections={result.elections} "
        f"max_unavailability={result.max_unavailability:.2f}s\n{result.report.summary()}\n"
    )
