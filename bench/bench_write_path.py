"""The write path (issue #16): the storage thread against the fsync on the loop, same build.

Three raftlog peers with ``storage_thread = false`` (each Ready's synced write on the
consensus loop) and with ``true`` (on the storage thread), alternating, a fresh cluster per
round; per round 20,000 RequestUpdates of 100 B at 128 in flight, 5,000 at 16 and 1,000 at 1,
fsync on. Also the CPU per committed update (``utime + stime`` of the leader and of the
followers from ``/proc`` over the 128-in-flight phase) and the leader changes during the
round (a phase that loses its leader is retried on the new one, and counted). Medians of
``RAFTLOG_BENCH_ROUNDS`` rounds; ratios within this run. docs/performance.md explains.

``RAFTLOG_BENCH_BASELINE=DIR`` compares builds instead: ``DIR`` holds another tree's
``raftlog`` package (e.g. ``git archive main raftlog | tar -x -C DIR``), which the peers of
the first variant import through ``PYTHONPATH``; both variants write on the loop. That is how
a change to the write path is measured against main in one run.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from integration.cluster import PeerCluster  # noqa: E402

from bench.loadgen import UpdateResult, run_updates  # noqa: E402
from bench.procstat import cpu_seconds  # noqa: E402

ROUNDS = int(os.environ.get("RAFTLOG_BENCH_ROUNDS", "3"))
TOTAL = int(os.environ.get("RAFTLOG_BENCH_WRITE_UPDATES", "20000"))
BASELINE = os.environ.get("RAFTLOG_BENCH_BASELINE")
Variant = tuple[str, bool, dict[str, str]]
"""(name, storage_thread, extra environment of the peers)"""
VARIANTS: tuple[Variant, Variant] = (
    (("baseline", False, {"PYTHONPATH": BASELINE}), ("this tree", False, {}))
    if BASELINE
    else (("fsync on the loop", False, {}), ("storage thread", True, {}))
)


def _one(storage_thread: bool, env: dict[str, str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        cluster = PeerCluster(Path(tmp), raft={"storage_thread": storage_thread})
        for peer in cluster.peers.values():
            peer.env.update(env)
        with cluster as c:
            c.start()
            leader = [c.wait_stable_leader()]
            changes = [0]

            def phase(inflight: int, total: int) -> UpdateResult:
                for _ in range(10):
                    try:
                        url = c.peers[leader[0]].url
                        return run_updates(url, c.ident, inflight=inflight, total=total)
                    except RuntimeError:  # the leader changed: go on with the new one
                        changes[0] += 1
                        leader[0] = c.wait_stable_leader()
                raise RuntimeError("no stable leader for ten attempts")

            phase(128, 2000)  # warm-up
            changes[0] = 0
            pids = {p: peer.process.pid for p, peer in c.peers.items() if peer.process}
            cpu: Callable[[], dict[str, float]] = lambda: {  # noqa: E731
                p: cpu_seconds(pid) for p, pid in pids.items()
            }
            before = cpu()
            busy = phase(128, TOTAL)
            after = cpu()
            mid = phase(16, TOTAL // 4)
            single = phase(1, 1000)
            used = {p: after[p] - before[p] for p in pids}
            followers = [used[p] for p in used if p != leader[0]]
            return {
                "r128": busy.rate,
                "p50_128": busy.p50_ms,
                "r16": mid.rate,
                "r1": single.rate,
                "p50_1": single.p50_ms,
                "cpu_leader_us": 1e6 * used[leader[0]] / TOTAL,
                "cpu_follower_us": 1e6 * statistics.mean(followers) / TOTAL,
                "changes": changes[0],
            }


def run() -> str:
    """Alternate the two variants ``ROUNDS`` times; report medians and ratios."""
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    loads: list[float] = []
    for n in range(ROUNDS):
        order = list(enumerate(VARIANTS)) if n % 2 == 0 else list(enumerate(VARIANTS))[::-1]
        for second, (name, thread, env) in order:
            print(f"   round {n + 1}/{ROUNDS}: {name}", flush=True)
            results[bool(second)].append(_one(thread, env))
            loads.append(os.getloadavg()[0])

    def med(second: bool, key: str) -> float:
        return statistics.median(r[key] for r in results[second])

    def row(label: str, key: str, fmt: str, ratio: bool = True) -> str:
        off, on = med(False, key), med(True, key)
        tail = f"{on / off:.2f}x" if ratio and off else ""
        return f"| {label} | {off:{fmt}} | {on:{fmt}} | {tail} |"

    changes = {t: sum(int(r["changes"]) for r in results[t]) for t in (False, True)}
    first_name, second_name = VARIANTS[0][0], VARIANTS[1][0]
    if BASELINE:
        title = "## Write path: this tree vs a baseline build"
        compared = f"the baseline build (`RAFTLOG_BENCH_BASELINE={BASELINE}`) vs this tree"
    else:
        title = "## Write path: storage thread vs fsync on the loop"
        compared = "`storage_thread = false` vs `true` (same build)"
    return "\n".join(
        [
            title,
            "",
            f"Three raftlog peers, {compared}, alternating,"
            f" a fresh cluster per round; {TOTAL:,} RequestUpdates of 100 B at 128 in flight,"
            f" {TOTAL // 4:,} at 16, 1,000 at 1, fsync on; medians of {ROUNDS} rounds. CPU per"
            " update: the peers' utime + stime over the 128-in-flight phase. docs/performance.md"
            " explains the design and the caveats.",
            "",
            f"| | {first_name} | {second_name} | ratio |",
            "|---|---:|---:|---:|",
            row("128 in flight, updates/s", "r128", ",.0f"),
            row("p50 at 128 in flight, ms", "p50_128", ".2f"),
            row("16 in flight, updates/s", "r16", ",.0f"),
            row("1 in flight, updates/s", "r1", ",.0f"),
            row("p50 at 1 in flight, ms", "p50_1", ".2f"),
            row("leader CPU per update, µs", "cpu_leader_us", ".0f"),
            row("follower CPU per update, µs", "cpu_follower_us", ".0f"),
            f"| leader changes during the rounds | {changes[False]} | {changes[True]} | |",
            "",
            f"Load average (1 min) during the run: {min(loads):.2f}-{max(loads):.2f}.",
        ]
    )
