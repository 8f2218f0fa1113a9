"""Transactions benchmark (issue #18): what a transaction costs next to plain publishes.

On a fresh three-peer cluster per round, ``IN_FLIGHT`` producers at once:

- small records one by one: ``publish`` (one entry per record) against transactions of
  ``TX_RECORDS`` records stored one ``tx.publish`` each (begin + one store per record +
  commit: ``TX_RECORDS + 2`` entries per transaction);
- batches: ``publish_batch`` of ``BATCH`` records (one entry) against a transaction storing
  the same batch in one ``tx.store`` (begin + store + commit: three entries);
- latency: the median time of one plain ``publish`` and of one ``commit`` (the last step of
  a transaction, the one a producer waits on to know its records are visible).

Records/s are wall clock (noisy on a shared machine); peer CPU seconds (from
``/proc/<pid>/stat``) hardly depend on the load.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from integration.cluster import PeerCluster  # noqa: E402

from bench.procstat import total_cpu  # noqa: E402
from raftlog.client import RaftClient  # noqa: E402
from raftlog.topics.client import TopicClient, make_record  # noqa: E402

RUNS = int(os.environ.get("RAFTLOG_BENCH_ROUNDS", "3"))
IN_FLIGHT = 16
SINGLES = 2_000
TX_RECORDS = 10
BATCH = 100
BATCHES = 200
VALUE = b"v" * 100


async def _run_jobs(jobs: int, job: Callable[[int], Awaitable[None]]) -> float:
    """Seconds to run ``jobs`` jobs, ``IN_FLIGHT`` at a time."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(jobs):
        queue.put_nowait(n)

    async def worker() -> None:
        while not queue.empty():
            await job(queue.get_nowait())

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return time.perf_counter() - t0


async def _round(out: dict[str, list[float]]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-tx-") as tmp, PeerCluster(Path(tmp)) as c:
        c.start()
        c.wait_leader()
        async with RaftClient(c.urls, c.ident, timeout=60) as client, TopicClient(client) as tc:
            await tc.create_topic("t")
            publish_latency: list[float] = []
            commit_latency: list[float] = []

            async def single(_: int) -> None:
                t0 = time.perf_counter()
                await tc.publish("t", VALUE)
                publish_latency.append(time.perf_counter() - t0)

            async def small_tx(_: int) -> None:
                tx = await tc.begin_transaction(timeout=120)
                for _k in range(TX_RECORDS):
                    await tx.publish("t", VALUE)
                t0 = time.perf_counter()
                await tx.commit()
                commit_latency.append(time.perf_counter() - t0)

            async def batch(_: int) -> None:
                await tc.publish_batch([make_record("t", VALUE) for _ in range(BATCH)])

            async def batch_tx(_: int) -> None:
                tx = await tc.begin_transaction(timeout=120)
                await tx.store("t", [VALUE] * BATCH)
                await tx.commit()

            cases: list[tuple[str, int, Callable[[int], Awaitable[None]], int]] = [
                ("single", SINGLES, single, 1),
                ("single_tx", SINGLES // TX_RECORDS, small_tx, TX_RECORDS),
                ("batch", BATCHES, batch, BATCH),
                ("batch_tx", BATCHES, batch_tx, BATCH),
            ]
            for name, jobs, job, per_job in cases:
                cpu = total_cpu(c.pids())
                seconds = await _run_jobs(jobs, job)
                records = jobs * per_job
                out[name].append(records / seconds)
                out[f"{name}_cpu"].append((total_cpu(c.pids()) - cpu) / records * 1e4)
            out["publish_ms"].append(statistics.median(publish_latency) * 1000)
            out["commit_ms"].append(statistics.median(commit_latency) * 1000)


def run() -> str:
    keys = ("single", "single_tx", "batch", "batch_tx")
    out: dict[str, list[float]] = {
        k: [] for k in (*keys, *(f"{k}_cpu" for k in keys), "publish_ms", "commit_ms")
    }
    loads = [os.getloadavg()[0]]
    for n in range(RUNS):
        print(f"   round {n + 1}/{RUNS}", flush=True)
        asyncio.run(_round(out))
        loads.append(os.getloadavg()[0])
    med = {k: statistics.median(v) for k, v in out.items()}
    rows = [
        ("one record per call", "single", "single_tx",
         f"`publish` x1 | tx of {TX_RECORDS} x `tx.publish`"),
        (f"{BATCH} records per call", "batch", "batch_tx",
         f"`publish_batch` | tx of one `tx.store` of {BATCH}"),
    ]
    lines = [
        "## Transactions: transactional vs plain publish",
        "",
        f"Three raftlog peers, a fresh cluster per round, {IN_FLIGHT} producers at once, "
        f"records of 100 B; medians of {RUNS} rounds. A transaction costs its begin and commit "
        "entries on top of its stores (each a durable, majority-committed entry), and nothing "
        "is visible until the commit.",
        "",
        "| workload | plain | transactional | plain records/s | transactional records/s "
        "| ratio | plain CPU s / 10k records | transactional CPU s / 10k records |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for label, plain, tx, what in rows:
        lines.append(
            f"| {label} | {what} | {med[plain]:,.0f} | {med[tx]:,.0f} "
            f"| {med[tx] / med[plain]:.2f} | {med[plain + '_cpu']:.2f} | {med[tx + '_cpu']:.2f} |"
        )
    lines += [
        "",
        f"Median latency: one plain `publish` {med['publish_ms']:.1f} ms; one `commit` "
        f"{med['commit_ms']:.1f} ms (then all {TX_RECORDS} records are visible).",
        "",
        f"Load average (1 min) during the run: {min(loads):.1f}-{max(loads):.1f} on "
        f"{os.cpu_count()} cores (shared with other engineers' tests): the records/s are noisy, "
        "the CPU columns much less so.",
    ]
    return "\n".join(lines)
