"""Security benchmark: what CURVE costs. The same three-peer raftlog cluster, plaintext and
with CURVE on every socket, driven by the same protocol-level load generator in one run.

Measured for both: RequestUpdate throughput and p50 latency with 1, 16 and 128 updates in
flight (100-byte entries, fsync on) and the RequestEntries read rate over the whole log.
Rounds alternate between the two set-ups (each cluster started fresh per round), medians of
``ROUNDS`` rounds; the ratio is secure / plain from the same invocation.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from integration.cluster import PeerCluster  # noqa: E402
from integration.secure_setup import SecureSetup  # noqa: E402

from bench.loadgen import find_leader, read_entries, run_updates  # noqa: E402

ROUNDS = int(os.environ.get("RAFTLOG_BENCH_ROUNDS", "3"))
INFLIGHT = ((1, 400), (16, 4000), (128, 30000))


def _round(secure: bool, out: dict[str, list[float]]) -> None:
    with tempfile.TemporaryDirectory(prefix="raftlog-bench-sec-") as tmp:
        setup = SecureSetup(Path(tmp)) if secure else None
        with PeerCluster(Path(tmp), ident="bench-security", security=setup) as cluster:
            cluster.start()
            cluster.wait_stable_leader()
            curve = cluster.curve
            leader = find_leader(cluster.urls, cluster.ident, curve=curve)
            for inflight, total in INFLIGHT:
                r = run_updates(
                    leader, cluster.ident, inflight=inflight, total=total, curve=curve
                )
                out[f"rate{inflight}"].append(r.rate)
                out[f"p50_{inflight}"].append(r.p50_ms)
            entries, seconds = read_entries(leader, cluster.ident, curve=curve)
            out["read"].append(entries / seconds)


def run() -> str:
    plain: dict[str, list[float]] = defaultdict(list)
    secure: dict[str, list[float]] = defaultdict(list)
    load_before = os.getloadavg()[0]
    for _ in range(ROUNDS):
        _round(False, plain)
        _round(True, secure)
    load_after = os.getloadavg()[0]
    lines = [
        "## Security: CURVE vs plaintext",
        "",
        f"Three raftlog peers on loopback, 100-byte updates, fsync on; medians of {ROUNDS} "
        "rounds alternating plain and CURVE clusters in one run (secure/plain ratio from the "
        f"same run). Load average {load_before:.1f} before, {load_after:.1f} after.",
        "",
        "| measure | plaintext | CURVE | CURVE / plain |",
        "|---|---:|---:|---:|",
    ]
    for inflight, _ in INFLIGHT:
        p, s = statistics.median(plain[f"rate{inflight}"]), statistics.median(
            secure[f"rate{inflight}"]
        )
        lines.append(
            f"| updates/s, {inflight} in flight | {p:,.0f} | {s:,.0f} | {s / p:.2f} |"
        )
        p50p, p50s = statistics.median(plain[f"p50_{inflight}"]), statistics.median(
            secure[f"p50_{inflight}"]
        )
        lines.append(
            f"| p50 ms, {inflight} in flight | {p50p:.2f} | {p50s:.2f} | {p50s / p50p:.2f} |"
        )
    p, s = statistics.median(plain["read"]), statistics.median(secure["read"])
    lines.append(f"| RequestEntries entries/s | {p:,.0f} | {s:,.0f} | {s / p:.2f} |")
    return "\n".join(lines) + "\n"
