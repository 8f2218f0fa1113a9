"""Bursts of RequestEntries streams that are never read: does the leader keep its office, and
how slow is a normal writer's worst write? (issue #12 finding 4; the timing half of
``tests/integration/peer/test_entries_bursts.py``, moved here by issue #33 because on a
loaded machine elections happen with or without bursts).

Three peers with 400-600 ms election timeouts; one writer commits small updates back to back
(20 ms pauses) while 50, 200 and 1,000 silent streams are opened on the leader in turn, each
held 3.5 s. Before the fix: worst writes of 1.05-2.8 s and an election per burst; the target
is no leader change, a worst write under 1 s and no loop pass as long as an election timeout.
``RAFTLOG_BENCH_ROUNDS`` rounds (3)."""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from integration.cluster import PeerCluster  # noqa: E402
from integration.peer.bursts import (  # noqa: E402
    BURST_SECONDS,
    BURSTS,
    RAFT,
    leaderships,
    max_loop_stall_ms,
    prefill,
    unread_streams,
)
from integration.peer.updates import update  # noqa: E402

ROUNDS = int(os.environ.get("RAFTLOG_BENCH_ROUNDS", "3"))


def _one_round(directory: Path) -> tuple[int, float, float]:
    """(leader changes, worst write seconds, longest loop pass ms) of one run."""
    with PeerCluster(directory, raft=RAFT) as cluster:
        cluster.start()
        leader = cluster.wait_stable_leader()
        prefill(cluster)
        elected = sum(leaderships(p.log_path) for p in cluster.peers.values())
        latencies: list[float] = []
        stop = threading.Event()

        def write() -> None:
            n = 0
            while not stop.is_set():
                started = time.monotonic()
                update(cluster, b"light load %d" % n, timeout=60)
                latencies.append(time.monotonic() - started)
                n += 1
                stop.wait(0.02)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        try:
            for burst in BURSTS:
                with unread_streams(cluster.peers[leader].url, cluster.ident, burst):
                    time.sleep(BURST_SECONDS)  # the measurement window
        finally:
            stop.set()
            writer.join(120)
        changes = sum(leaderships(p.log_path) for p in cluster.peers.values()) - elected
        cluster.stop()
        stall = max(max_loop_stall_ms(p.log_path) for p in cluster.peers.values())
    return changes, max(latencies), stall


def run() -> str:
    """The Markdown section: per round and the median."""
    rows = []
    for n in range(ROUNDS):
        with tempfile.TemporaryDirectory(prefix="raftlog-bursts-") as directory:
            rows.append(_one_round(Path(directory)))
            print(f"round {n + 1}: {rows[-1]}", flush=True)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [
        "## Bursts of unread RequestEntries streams",
        "",
        f"Load average at the end: {load}. Target: 0 leader changes, worst write < 1 s,",
        "longest loop pass < 600 ms (the election timeout's lower bound).",
        "",
        "| round | leader changes | worst write (s) | longest loop pass (ms) |",
        "|---|---|---|---|",
    ]
    lines += [f"| {i + 1} | {c} | {w:.3f} | {s:.1f} |" for i, (c, w, s) in enumerate(rows)]
    lines.append(
        f"| median | {statistics.median(r[0] for r in rows)} "
        f"| {statistics.median(r[1] for r in rows):.3f} "
        f"| {statistics.median(r[2] for r in rows):.1f} |"
    )
    return "\n".join(lines) + "\n"
