"""Cluster benchmark: a three-peer raftlog cluster and a three-peer reference (zmq-raft)
cluster, driven by the same protocol-level load generator (``bench.loadgen``) in one run.

Measured for both: RequestUpdate throughput and latency with 1, 16 and 128 updates in flight
(100-byte entries, fsync on), RequestEntries read rate over the whole log (100k+ entries),
time from ``kill -9`` of the leader to the next committed update, and time from restarting
all three peers (on the log written above) to the first committed update. For raftlog alone:
a peer started on a 1,000,000-entry log until it answers and commits.

Runs alternate between the two clusters (each started fresh per round), medians of
``ROUNDS`` rounds; ratios are raftlog / reference from the same invocation. The two
clusters never run at the same time: the machine has 2 cores.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "interop")]

from integration.cluster import PeerCluster, wait_for  # noqa: E402
from reference import ReferenceCluster  # noqa: E402

from bench.loadgen import find_leader, read_entries, run_updates, update_once  # noqa: E402
from raftlog.entry import LogEntry  # noqa: E402
from raftlog.storage.base import HardState  # noqa: E402
from raftlog.storage.rocks import open_storage  # noqa: E402

ROUNDS = int(os.environ.get("RAFTLOG_BENCH_ROUNDS", "3"))
INFLIGHT = ((1, 400), (16, 4000), (128, 30000))
READ_TARGET = 100_000


class Cluster(Protocol):
    ident: str

    def kill_leader(self) -> None: ...
    def restart_all(self) -> None: ...


class _Ours:
    def __init__(self, c: PeerCluster) -> None:
        self.c = c
        self.ident = c.ident
        self.urls = c.urls

    def kill_leader(self) -> None:
        leader = self.c.wait_leader()
        self.c.kill(leader)

    def restart_all(self) -> None:
        for peer_id in self.c.peers:
            self.c.kill(peer_id)
        self.c.start()


class _Reference:
    def __init__(self, c: ReferenceCluster) -> None:
        self.c = c
        self.ident = c.ident
        self.urls = list(c.urls.values())

    def kill_leader(self) -> None:
        self.c.kill(self.c.wait_for_leader())

    def restart_all(self) -> None:
        for peer_id in self.c.running_ids:
            self.c.kill(peer_id)
        self.c.start_all()


@contextmanager
def _cluster(kind: str, workdir: Path) -> Iterator[Any]:
    if kind == "raftlog":
        with PeerCluster(workdir) as c:
            c.start()
            c.wait_leader()
            yield _Ours(c)
    else:
        with ReferenceCluster(workdir) as rc:
            rc.start_all()
            rc.wait_for_leader()
            yield _Reference(rc)


def _one_round(kind: str, out: dict[str, list[float]]) -> None:
    with (
        tempfile.TemporaryDirectory(prefix=f"bench-{kind}-") as tmp,
        _cluster(kind, Path(tmp)) as c,
    ):
        leader = find_leader(c.urls, c.ident)
        written = 0
        for inflight, total in INFLIGHT:
            r = run_updates(leader, c.ident, inflight=inflight, total=total)
            written += total
            out[f"rate{inflight}"].append(r.rate)
            out[f"p50_{inflight}"].append(r.p50_ms)
            out[f"p99_{inflight}"].append(r.p99_ms)
        if written < READ_TARGET:
            run_updates(leader, c.ident, inflight=128, total=READ_TARGET - written)
        entries, seconds = read_entries(leader, c.ident)
        out["read"].append(entries / seconds)
        out["read_n"].append(entries)
        c.kill_leader()
        t0 = time.perf_counter()
        update_once(c.urls, c.ident)
        out["failover"].append(time.perf_counter() - t0)
        c.restart_all()
        t0 = time.perf_counter()
        update_once(c.urls, c.ident, timeout=120)
        out["restart"].append(time.perf_counter() - t0)


def _ours_on_a_million(out: dict[str, list[float]]) -> None:
    """A single-peer cluster (it leads at once) started on a prebuilt 1M-entry log."""

    with tempfile.TemporaryDirectory(prefix="bench-1m-") as tmp:
        c = PeerCluster(Path(tmp), ids=("1",))
        store, hard, snaps = open_storage(c.peers["1"].data_dir)
        stamp = int(time.time()).to_bytes(4, "big")
        batch = 4096
        for first in range(1, 1_000_001, batch):
            n = min(batch, 1_000_001 - first)
            store.append(
                first,
                [
                    LogEntry(stamp + (first + k).to_bytes(8, "big"), 0, 1, b"d" * 100)
                    for k in range(n)
                ],
            )
        hard.save(HardState(current_term=1, last_applied=1_000_000))  # as a peer that ran
        store.close(), hard.close(), snaps.close()
        with c:
            for _ in range(ROUNDS):
                t0 = time.perf_counter()
                c.start()
                wait_for("the peer to answer", lambda: c.log_info("1"), 120, interval=0.005)
                out["m_answer"].append(time.perf_counter() - t0)
                update_once(c.urls, c.ident, timeout=120)
                out["m_commit"].append(time.perf_counter() - t0)
                c.kill("1")


def _med(values: list[float]) -> float:
    return statistics.median(values)


def run() -> str:
    ours: dict[str, list[float]] = _series()
    ref: dict[str, list[float]] = _series()
    for n in range(ROUNDS):
        print(f"   round {n + 1}/{ROUNDS}: reference", flush=True)
        _one_round("reference", ref)
        print(f"   round {n + 1}/{ROUNDS}: raftlog", flush=True)
        _one_round("raftlog", ours)
    _ours_on_a_million(ours)
    return _report(ours, ref)


def _series() -> dict[str, list[float]]:
    return defaultdict(list)


def _report(ours: dict[str, list[float]], ref: dict[str, list[float]]) -> str:
    def row(label: str, key: str, fmt: Callable[[float], str], higher_better: bool) -> str:
        a, b = _med(ours[key]), _med(ref[key])
        ratio = a / b if higher_better else b / a
        return f"| {label} | {fmt(a)} | {fmt(b)} | {ratio:.2f}x |"

    def rate(v: float) -> str:
        return f"{v:,.0f}"

    def ms(v: float) -> str:
        return f"{v:.2f} ms"

    def sec(v: float) -> str:
        return f"{v:.3f} s"

    lines = [
        "## Cluster (three raftlog peers vs three reference zmq-raft peers)",
        "",
        "Same load generator (`bench/loadgen.py`, one DEALER, the wire protocol directly) for",
        f"both; 100-byte RequestUpdates, fsync on; medians of {ROUNDS} rounds, clusters run",
        "alternately, never together. 'better' = how many times raftlog is better (throughput:",
        "ours/ref; times: ref/ours).",
        "",
        "| measure | raftlog | reference | better |",
        "|---|---:|---:|---:|",
    ]
    for inflight, _ in INFLIGHT:
        lines.append(row(f"updates/s, {inflight} in flight", f"rate{inflight}", rate, True))
        lines.append(row(f"p50 latency, {inflight} in flight", f"p50_{inflight}", ms, False))
        lines.append(row(f"p99 latency, {inflight} in flight", f"p99_{inflight}", ms, False))
    n = int(_med(ours["read_n"]))
    lines.append(row(f"RequestEntries read, entries/s (~{n:,} entries)", "read", rate, True))
    lines.append(row("kill -9 of the leader -> next committed update", "failover", sec, False))
    lines.append(row("restart of all 3 peers -> first committed update", "restart", sec, False))
    lines += [
        "",
        "raftlog alone, one peer started on a 1,000,000-entry log (the reference needs 9.5 s at",
        "158k entries, tests/interop/README.md; writing 1M entries through it takes too long here):",
        "",
        "| measure | seconds |",
        "|---|---:|",
        f"| start -> answers RequestLogInfo | {_med(ours['m_answer']):.3f} |",
        f"| start -> first committed update | {_med(ours['m_commit']):.3f} |",
    ]
    return "\n".join(lines) + "\n"
