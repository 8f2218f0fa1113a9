"""``make soak``: a long mixed load with faults, watching the peers' resources stay flat.

Load: the schedules' writers and topic publisher (paced), plus readers — a RequestEntries
reader that re-reads recent ranges from a random peer, a ``Subscriber`` following the log
live, and a topic reader. Faults, one every ``RAFTLOG_SOAK_FAULT_EVERY`` seconds in turn:
kill -9 + restart of a follower-side peer, a partition of the leader, a paused (stale)
leader, a one-way link. Peer ``1`` is never killed, so its process lives the whole run and
its memory and descriptors show any leak. Log compaction is on, so disk use must stay
bounded too.

Every ``RAFTLOG_SOAK_SAMPLE_EVERY`` seconds each peer's RSS (``/proc/<pid>/status``), open
file descriptors (``/proc/<pid>/fd``) and data-directory size are sampled. "Flat" means: the
mean of the last quarter of samples is at most 1.25x the mean of the second quarter (the first
quarter is warm-up) for RSS, at most +8 descriptors, and disk at most 1.5x (compaction makes it
a saw-tooth). At the end the history checker runs over everything that was acknowledged.

Environment: ``RAFTLOG_SOAK_MINUTES`` (30), ``RAFTLOG_SOAK_FAULT_EVERY`` (60),
``RAFTLOG_SOAK_REQUEST_ID_TTL_MS`` (the peers' default, 8 h; e.g. 60000 to bound the index),
``RAFTLOG_SOAK_SAMPLE_EVERY`` (10), ``RAFTLOG_SOAK_DOC`` (docs/reliability.md; ``-``: print).
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import os
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

from integration.cluster import wait_for

from faults.chaos import load, load_note, machine, write_doc
from faults.cluster import IDENT, FaultCluster
from faults.harness import collect_logs, read_topic
from faults.history import Op, Report, check
from faults.workload import TOPIC, Workload, WorkloadSpec, max_unavailability
from raftlog.client import RaftClient, Subscriber
from raftlog.topics.client import TopicClient

ANCHOR = "1"
RAFT: dict[str, object] = {"log_compaction_threshold": 20_000}


def raft_options() -> dict[str, object]:
    """Compaction on; ``RAFTLOG_SOAK_REQUEST_ID_TTL_MS`` bounds the request-id index (kept
    past compaction for the TTL, 8 h by default, so it grows with every write until then)."""
    ttl = os.environ.get("RAFTLOG_SOAK_REQUEST_ID_TTL_MS")
    if not ttl:
        return dict(RAFT)
    return {
        **RAFT,
        "request_id_ttl": int(ttl),
        "request_id_ttl_accept_margin": max(1000, int(ttl) // 2),
    }


def sample(cluster: FaultCluster) -> dict[str, tuple[int, int, int] | None]:
    """Per peer: (RSS KiB, open fds, data-dir bytes), None while it is down."""
    out: dict[str, tuple[int, int, int] | None] = {}
    for peer_id, peer in cluster.peers.peers.items():
        process = peer.process
        if process is None or process.poll() is not None:
            out[peer_id] = None
            continue
        try:
            rss = next(
                int(line.split()[1])
                for line in Path(f"/proc/{process.pid}/status").read_text().splitlines()
                if line.startswith("VmRSS:")
            )
            fds = len(os.listdir(f"/proc/{process.pid}/fd"))
        except (OSError, StopIteration):
            out[peer_id] = None
            continue
        disk = 0
        for root, _dirs, files in os.walk(peer.data_dir):
            for name in files:
                with contextlib.suppress(OSError):  # compacted away while we walk
                    disk += os.stat(os.path.join(root, name)).st_size
        out[peer_id] = (rss, fds, disk)
    return out


class Readers:
    """RequestEntries re-reads, a live Subscriber and topic reads, in their own loop."""

    def __init__(self, cluster: FaultCluster) -> None:
        self.cluster = cluster
        self.counts: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    async def _main(self) -> None:
        await asyncio.gather(self._entries(), self._subscriber(), self._topic())

    async def _entries(self) -> None:
        rng = random.Random(5)
        async with RaftClient(self.cluster.urls, IDENT, timeout=5.0) as client:
            while not self._stop.is_set():
                try:
                    info = await client.request_log_info()
                    start = max(0, info.commit_index - 500)
                    async for _item in client.request_entries(start, count=200):
                        self.counts["entries_read"] += 1
                except Exception:
                    self.counts["entries_errors"] += 1
                await asyncio.sleep(rng.uniform(0.5, 2.0))

    async def _subscriber(self) -> None:
        async with RaftClient(self.cluster.urls, IDENT, timeout=10.0) as client:
            while not self._stop.is_set():
                try:
                    async with Subscriber(client, from_index="end") as sub:
                        async for _item in sub:
                            self.counts["subscribed"] += 1
                            if self._stop.is_set():
                                return
                except Exception:
                    self.counts["subscriber_restarts"] += 1
                    await asyncio.sleep(0.5)

    async def _topic(self) -> None:
        async with (
            RaftClient(self.cluster.urls, IDENT, timeout=5.0) as raft,
            TopicClient(raft) as topics,
        ):
            while not self._stop.is_set():
                try:
                    info = await raft.request_log_info()
                    page = await topics.read(TOPIC, from_index=max(0, info.commit_index - 300))
                    self.counts["topic_records_read"] += len(page.records)
                except Exception:
                    self.counts["topic_errors"] += 1
                await asyncio.sleep(1.0)


def inject(cluster: FaultCluster, turn: int, rng: random.Random) -> str:
    """One fault, healed before returning."""
    leader = cluster.wait_leader()
    kind = ("kill", "partition", "pause", "one_way")[turn % 4]
    if kind == "kill":
        victim = rng.choice([p for p in cluster.ids if p != ANCHOR])
        cluster.kill(victim)
        time.sleep(rng.uniform(0.5, 2.0))  # how long it stays down is the fault itself
        cluster.restart(victim)
    elif kind == "partition":
        cluster.net.partition([leader], [p for p in cluster.ids if p != leader])
        cluster.wait_leader(exclude=leader)
        cluster.net.heal()
    elif kind == "pause":
        cluster.pause(leader)
        cluster.wait_leader(exclude=leader)
        cluster.resume(leader)
    else:
        follower = rng.choice([p for p in cluster.ids if p != leader])
        cluster.net.one_way(follower, leader)
        time.sleep(3.0)
        cluster.net.heal()
    return kind


def flat(values: list[float], ratio: float, slack: float) -> tuple[bool, str]:
    if len(values) < 8:
        return True, "too few samples"
    q = len(values) // 4
    second, last = statistics.mean(values[q : 2 * q]), statistics.mean(values[-q:])
    return last <= second * ratio + slack, f"{second:.0f} -> {last:.0f}"


def main() -> int:
    faulthandler.enable()  # a native abort (libzmq's assertions) prints every thread's stack
    minutes = float(os.environ.get("RAFTLOG_SOAK_MINUTES", "30"))
    fault_every = float(os.environ.get("RAFTLOG_SOAK_FAULT_EVERY", "60"))
    sample_every = float(os.environ.get("RAFTLOG_SOAK_SAMPLE_EVERY", "10"))
    when, load_before = datetime.now(UTC), f"{load()} ({load_note()})"
    rng = random.Random(11)
    samples: dict[str, list[tuple[float, tuple[int, int, int]]]] = defaultdict(list)
    faults: Counter[str] = Counter()
    with (
        tempfile.TemporaryDirectory(prefix="raftlog-soak-") as tmp,
        FaultCluster(Path(tmp), raft=raft_options()) as cluster,
    ):
        cluster.start()
        cluster.peers.wait_stable_leader(30)
        workload = Workload(cluster.urls, IDENT, WorkloadSpec(writers=2, pace=0.005))
        readers = Readers(cluster)
        workload.start()
        readers.start()
        started = time.monotonic()
        deadline = started + minutes * 60
        next_fault, next_sample, turn = started + fault_every, started, 0
        try:
            while (now := time.monotonic()) < deadline:
                if now >= next_sample:
                    for peer_id, got in sample(cluster).items():
                        if got is not None:
                            samples[peer_id].append((now - started, got))
                    next_sample += sample_every
                if now >= next_fault:
                    faults[inject(cluster, turn, rng)] += 1
                    turn += 1
                    next_fault += fault_every
                time.sleep(max(0.0, min(next_sample, next_fault) - time.monotonic()))
            cluster.net.heal()
            healed = time.monotonic()
            wait_for("acks after the soak", lambda: workload.acked(since=healed) >= 10, 60)
        finally:
            readers.stop()
            workload.stop()
        ended = time.monotonic()
        ops = workload.snapshot()
        commit = cluster.wait_converged()
        reads = asyncio.run(read_topic(cluster, cluster.ids))
        elections = cluster.elections()
        cluster.peers.stop()
        logs = collect_logs(cluster, cluster.ids, commit)
        report = check(ops, logs, reads)
    return finish(
        minutes,
        when,
        load_before,
        samples,
        faults,
        readers.counts,
        ops,
        report,
        elections,
        max_unavailability(ops, started, ended),
    )


def finish(
    minutes: float,
    when: datetime,
    load_before: str,
    samples: dict[str, list[tuple[float, tuple[int, int, int]]]],
    faults: Counter[str],
    reads: Counter[str],
    ops: list[Op],
    report: Report,
    elections: int,
    unavailable: float,
) -> int:
    """Print the soak's table (and write it into the doc); 0 if promises held and the
    long-lived peer stayed flat."""
    ttl = os.environ.get("RAFTLOG_SOAK_REQUEST_ID_TTL_MS")
    ttl_setting = f"RAFTLOG_SOAK_REQUEST_ID_TTL_MS={ttl} " if ttl else ""
    lines = [
        f"Soak of {minutes:g} min{' (**shortened run**)' if minutes < 30 else ''}, "
        f"{when:%Y-%m-%d %H:%M} UTC on {machine()}; load average before {load_before}, after "
        f"{load()}. Command: "
        f"`RAFTLOG_SOAK_MINUTES={minutes:g} "
        f"{ttl_setting}"
        f"make soak`. Faults: {dict(faults)}; readers: "
        f"{dict(reads)}; elections: {elections}; max unavailability {unavailable:.1f} s.",
        "",
        f"Checker: `{report.summary().splitlines()[0]}`",
        "",
        "| peer | samples | RSS MiB (2nd quarter -> last quarter, max) | open fds | disk MiB "
        "(max) | flat |",
        "|---|---|---|---|---|---|",
    ]
    all_flat = report.valid
    for peer_id, rows in sorted(samples.items()):
        rss = [r[1][0] / 1024 for r in rows]
        fds = [float(r[1][1]) for r in rows]
        disk = [r[1][2] / 2**20 for r in rows]
        ok_rss, rss_text = flat(rss, 1.25, 0)
        ok_fds, fds_text = flat(fds, 1.0, 8)
        ok_disk, disk_text = flat(disk, 1.5, 1)
        ok = ok_rss and ok_fds and ok_disk
        note = "" if peer_id == ANCHOR else " (restarted by faults)"
        if peer_id == ANCHOR:
            all_flat = all_flat and ok
        lines.append(
            f"| {peer_id}{note} | {len(rows)} | {rss_text}, {max(rss):.0f} | {fds_text}, "
            f"{max(fds):.0f} | {disk_text}, {max(disk):.0f} | {'yes' if ok else 'NO'} |"
        )
    text = "\n".join(lines)
    print(report.summary())  # every example, not only the counts that go into the doc
    print(text)
    doc = os.environ.get("RAFTLOG_SOAK_DOC", "docs/reliability.md")
    if doc != "-":
        write_doc(Path(doc), text, "soak-table")
    return 0 if all_flat else 1


def _stop_cleanly(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt  # unwinds the with-blocks: every process is stopped


if __name__ == "__main__":
    # A background job ignores SIGINT; SIGTERM too must stop the peers, not orphan them.
    signal.signal(signal.SIGTERM, _stop_cleanly)
    signal.signal(signal.SIGINT, _stop_cleanly)
    sys.exit(main())
