"""Where the CPU of a committed update goes at 128 in flight, thread by thread, with the
reference's own client (issue #28; docs/performance.md section 3).

Why this view: on a 2-core machine the client, the leader and two followers share the cores
at 128 in flight, so the rate follows the *total* CPU per update, and a thread that is
runnable but waiting for a core looks busy to wall-time profilers (py-spy's ``--gil`` shares
put that wait into whatever the thread was doing). This tool reports, per update:

* the CPU of every thread of every peer (``utime + stime`` of ``/proc/<pid>/task/<tid>/stat``,
  split into user and system), how long it was runnable but waiting for a core (the
  second field of ``schedstat``), and how often it went to sleep and was preempted (the
  context switches of ``status``);
* the client's own CPU: the reference's Node process is a child of this one, so it is in
  ``os.times()``'s children figures once it has exited (its start-up is included, which is
  why the default phase is long); ``bench/loadgen.py`` runs in this process;
* the peers' loop passes and synced writes (from their ``/metrics``).

``--client both`` runs the reference's client and ``bench/loadgen.py`` in alternation, a
fresh cluster each: the same peers cost more per update behind the reference's client, and
the sleeps and passes per update say why (docs/performance.md section 3).

A fresh three-peer cluster per round and client; ``--rounds`` rounds of ``--updates``
updates at ``--inflight`` in flight; medians over the rounds. Run:
``python -m bench.cpu_split`` (``make install interop`` first: the reference client is
Node's).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from integration.cluster import PeerCluster  # noqa: E402

from bench.loadgen import run_updates  # noqa: E402
from bench.procstat import ThreadTimes, load_average, thread_times  # noqa: E402
from bench.reference_client import NodeUpdates, run_phases, updates_phase  # noqa: E402

_COUNTS = ("raftlog_loop_pass_seconds_count", "raftlog_fsync_duration_seconds_count")
"""The ``/metrics`` counters read before and after the phase (loop passes, synced writes)."""


def metric_counts(http_url: str) -> dict[str, float]:
    """The ``_COUNTS`` counters of one peer's ``/metrics`` (0.0 when absent)."""
    with urllib.request.urlopen(f"{http_url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    counts = dict.fromkeys(_COUNTS, 0.0)
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name in counts:
            counts[name] = float(value)
    return counts


def _children_cpu() -> float:
    times = os.times()
    return times.children_user + times.children_system


CLIENTS = ("reference", "loadgen")
"""What ``--client`` may name: the reference's Node client, or ``bench/loadgen.py``."""

Row = tuple[float, float, float, float, float, float]
"""A thread's CPU, user, system and wait for a core (µs per update), then its sleeps and
preemptions per update."""


@dataclass
class Figures:
    """What the rounds measured, per update; one value (or row) per round and peer."""

    totals: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    threads: dict[str, list[Row]] = field(default_factory=lambda: defaultdict(list))


def drive(
    client: str, cluster: PeerCluster, leader: str, inflight: int, updates: int
) -> tuple[float, float]:
    """Commit ``updates`` updates with ``client``; (updates/s, the client's CPU µs per
    update)."""
    if client == "reference":
        before = _children_cpu()
        (result,) = run_phases(cluster.urls, cluster.ident, [updates_phase(inflight, updates)])
        assert isinstance(result, NodeUpdates)
        return result.rate, (_children_cpu() - before) / updates * 1e6
    url = cluster.peers[leader].url
    before = time.process_time()
    done = run_updates(url, cluster.ident, inflight=inflight, total=updates)
    return done.rate, (time.process_time() - before) / updates * 1e6


def one_round(client: str, inflight: int, updates: int, figures: Figures) -> None:
    """A fresh cluster, one phase; appends this round's per-update figures to ``figures``."""
    with tempfile.TemporaryDirectory() as tmp, PeerCluster(Path(tmp), http=True) as cluster:
        cluster.start()
        leader = cluster.wait_stable_leader()
        drive(client, cluster, leader, 1, 200)  # warm-up
        peers = cluster.peers.items()
        pids = {peer_id: peer.process.pid for peer_id, peer in peers if peer.process}
        urls = {peer_id: peer.http_url for peer_id, peer in peers if peer.http_url}
        before = {peer_id: thread_times(pid) for peer_id, pid in pids.items()}
        counts_before = {peer_id: metric_counts(url) for peer_id, url in urls.items()}
        rate, client_cpu = drive(client, cluster, leader, inflight, updates)
        totals = figures.totals
        totals["updates/s"].append(rate)
        totals["the client's CPU"].append(client_cpu)
        everything = client_cpu
        for peer_id, pid in pids.items():
            role = "leader" if peer_id == leader else "follower"
            rows = _thread_rows(role, before[peer_id], thread_times(pid), updates)
            for label, row in rows.items():
                figures.threads[label].append(row)
            peer_cpu = sum(row[0] for row in rows.values())
            totals[f"{role}: all its threads' CPU"].append(peer_cpu)
            everything += peer_cpu
            after = metric_counts(urls[peer_id])
            for name in _COUNTS:
                short = "loop passes" if "loop" in name else "synced writes"
                per = (after[name] - counts_before[peer_id][name]) / updates
                totals[f"{role}: {short} per update"].append(per)
        totals["client and peers together"].append(everything)
        totals["what the cores offer per update"].append((os.cpu_count() or 1) * 1e6 / rate)


def _thread_rows(
    role: str,
    before: dict[tuple[str, str], ThreadTimes],
    after: dict[tuple[str, str], ThreadTimes],
    updates: int,
) -> dict[str, Row]:
    """Each thread's row, labelled ``role name #rank`` with threads of one name ranked by CPU
    (``raftlog-peer #0`` is the consensus loop), so that rounds line up."""
    by_name: dict[str, list[Row]] = defaultdict(list)
    scale = 1e6 / updates
    for key, now in after.items():
        was = before.get(key, ThreadTimes(0.0, 0.0, 0.0))
        user, system = (now.user - was.user) * scale, (now.system - was.system) * scale
        waiting = (now.waiting - was.waiting) * scale
        sleeps = (now.sleeps - was.sleeps) / updates
        preemptions = (now.preemptions - was.preemptions) / updates
        by_name[key[0]].append((user + system, user, system, waiting, sleeps, preemptions))
    return {
        f"{role} {name} #{rank}": row
        for name, rows in by_name.items()
        for rank, row in enumerate(sorted(rows, reverse=True))
    }


def _number(value: float) -> str:
    return f"{value:,.3f}" if abs(value) < 1 else f"{value:,.1f}"


def report(client: str, figures: Figures, rounds: int) -> str:
    """Two Markdown tables of medians: the totals, then every thread that used at least
    0.5 µs per update (the idle ones -- the monitor, RocksDB's -- only add noise). The
    samples column says how many values a median is of: one per round for the client and
    the leader, two per round for the followers (both are "follower")."""
    lines = [
        f"| {client}'s client: per update, {rounds} rounds (µs unless named) | median | samples |",
        "|---|---:|---:|",
    ]
    for name, values in figures.totals.items():
        lines.append(f"| {name} | {_number(statistics.median(values))} | {len(values)} |")
    lines += [
        "",
        "| thread (per update) | CPU µs | user µs | system µs | waiting for a core µs "
        "| sleeps | preemptions | samples |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, rows in sorted(figures.threads.items()):
        medians = [statistics.median(column) for column in zip(*rows, strict=True)]
        if medians[0] >= 0.5:
            cells = " | ".join(_number(m) for m in medians)
            lines.append(f"| {label} | {cells} | {len(rows)} |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    """Parse the options, run the rounds, print the table with the load around it."""
    parser = argparse.ArgumentParser(prog="python -m bench.cpu_split", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--updates", type=int, default=40_000)
    parser.add_argument("--inflight", type=int, default=128)
    parser.add_argument("--client", choices=(*CLIENTS, "both"), default="reference")
    args = parser.parse_args(argv)
    clients = CLIENTS if args.client == "both" else (args.client,)
    print(f"load average before: {load_average()}", flush=True)
    figures = {client: Figures() for client in clients}
    for _ in range(args.rounds):
        for client in clients:
            one_round(client, args.inflight, args.updates, figures[client])
    print("\n\n".join(report(client, figures[client], args.rounds) for client in clients))
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main(sys.argv[1:])
