"""Read consistency benchmark (issue #29): what a linearizable read costs next to ``any``.

On a fresh three-peer cluster per round, a topic with a few records, ``TR`` reads of one
record (``limit=1``) one after the other from one client:

- ``any`` on the leader and on a follower: the peer's applied state, no coordination;
- ``read_your_writes`` on a follower, at the client's last write (already applied: the cost
  of carrying the minimum index);
- ``linearizable`` on the leader (ReadIndex: one heartbeat round to a majority) and on a
  follower (``RI`` to the leader, then the read at that index on the follower);
- ``linearizable`` on the leader with ``IN_FLIGHT`` reads outstanding: reads that arrive
  together share one heartbeat round, so the rate is far above 1 / latency.

Latencies are p50 and p99 per kind, medians over ``RAFTLOG_BENCH_ROUNDS`` rounds (default
3); the ratio to ``any`` on the same peer is taken within each round. ``RAFTLOG_BENCH_READS``
(default 2000) sets the reads per kind. Defaults finish in about a minute on the reference
machine; the lead's quiet-machine figures go to bench/results/reads.md.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from integration.cluster import PeerCluster  # noqa: E402

from bench.procstat import load_average  # noqa: E402
from raftlog.client import RaftClient  # noqa: E402
from raftlog.topics.client import TopicClient  # noqa: E402

RUNS = int(os.environ.get("RAFTLOG_BENCH_ROUNDS", "3"))
READS = int(os.environ.get("RAFTLOG_BENCH_READS", "2000"))
IN_FLIGHT = 32
TOPIC = "bench-reads"
KINDS = (
    ("any", "leader"),
    ("any", "follower"),
    ("read_your_writes", "follower"),
    ("linearizable", "leader"),
    ("linearizable", "follower"),
)


async def _latencies(tc: TopicClient, consistency: str, url: str | None) -> list[float]:
    """Seconds of each of ``READS`` sequential one-record reads."""
    out = []
    for _ in range(READS):
        t0 = time.perf_counter()
        result = await tc.read(TOPIC, limit=1, url=url, consistency=consistency)
        out.append(time.perf_counter() - t0)
        if not result.records:
            raise AssertionError("the benchmark topic read empty")
    return out


async def _concurrent_rate(tc: TopicClient) -> float:
    """Linearizable reads per second on the leader with ``IN_FLIGHT`` outstanding."""
    remaining = READS

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await tc.read(TOPIC, limit=1, consistency="linearizable")

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return READS / (time.perf_counter() - t0)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _round(out: dict[str, list[float]]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-reads-") as tmp, PeerCluster(Path(tmp)) as c:
        c.start()
        leader = c.wait_stable_leader()
        follower_url = next(p.url for pid, p in c.peers.items() if pid != leader)
        async with RaftClient(c.urls, c.ident, timeout=60) as client, TopicClient(client) as tc:
            await tc.create_topic(TOPIC)
            for n in range(10):
                await tc.publish(TOPIC, b"record %d" % n)
            await _latencies(tc, "any", follower_url)  # warm every connection up
            for consistency, where in KINDS:
                url = None if where == "leader" else follower_url
                lat = await _latencies(tc, consistency, url)
                out[f"{consistency}@{where}:p50"].append(_pct(lat, 0.5) * 1000)
                out[f"{consistency}@{where}:p99"].append(_pct(lat, 0.99) * 1000)
            for where in ("leader", "follower"):
                base = out[f"any@{where}:p50"][-1]
                out[f"ratio@{where}"].append(out[f"linearizable@{where}:p50"][-1] / base)
            out["concurrent"].append(await _concurrent_rate(tc))


def run() -> str:
    """Run ``RUNS`` rounds; a Markdown section."""
    out: dict[str, list[float]] = {}
    for key in [f"{c}@{w}:{q}" for c, w in KINDS for q in ("p50", "p99")]:
        out[key] = []
    out.update({"ratio@leader": [], "ratio@follower": [], "concurrent": []})
    load_before = load_average()
    for _ in range(RUNS):
        asyncio.run(_round(out))
    med = {key: statistics.median(values) for key, values in out.items()}
    lines = [
        "## Read consistency (issue #29)",
        "",
        f"One-record `TR` reads from one client, {READS} per kind, sequential; medians of "
        f"{RUNS} rounds on a fresh 3-peer cluster (load average {load_before} before). "
        "Command: `python -m bench reads`.",
        "",
        "| level | peer | p50 ms | p99 ms |",
        "|---|---|---|---|",
    ]
    for consistency, where in KINDS:
        key = f"{consistency}@{where}"
        lines.append(
            f"| `{consistency}` | {where} | {med[key + ':p50']:.2f} | {med[key + ':p99']:.2f} |"
        )
    lines += [
        "",
        f"Linearizable / any (p50, same round): leader {med['ratio@leader']:.2f}x, follower "
        f"{med['ratio@follower']:.2f}x. Linearizable reads on the leader with {IN_FLIGHT} in "
        f"flight: {med['concurrent']:,.0f} reads/s (reads that arrive together share one "
        "heartbeat round).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
