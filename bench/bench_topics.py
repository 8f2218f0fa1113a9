"""Topics benchmark: durable publish_batch throughput, and topic-filtered reads that must not
slow down as the log grows (the topic index, not a scan, serves them).

- publish: batches of 100 records of 100 B, ``IN_FLIGHT`` batches outstanding, on a fresh
  three-peer cluster; records/s (each batch is one fsync'd, majority-committed entry).
- filtered read: a topic holding 1% of the records, read back with ``TR`` pages of 1000,
  measured on a log of ``SMALL`` records and again after growing it to ``LARGE``; the ratio
  large/small shows whether the rate depends on the log's size.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from integration.cluster import PeerCluster  # noqa: E402

from raftlog.client import RaftClient  # noqa: E402
from raftlog.client.topics import TopicClient, make_record  # noqa: E402

RUNS = int(os.environ.get("RAFTLOG_BENCH_ROUNDS", "3"))
BATCH = 100
IN_FLIGHT = 16
PUBLISH_BATCHES = 500
SMALL = 100_000
LARGE = 400_000


async def _publish(tc: TopicClient, batches: int, topic_of: Callable[[int], str]) -> float:
    """Seconds to publish ``batches`` batches of ``BATCH`` records; batch n goes to topic
    ``topic_of(n)`` (producers batch per topic, as with Kafka)."""
    value = b"v" * 100
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(batches):
        queue.put_nowait(n)

    async def worker() -> None:
        while not queue.empty():
            topic = topic_of(queue.get_nowait())
            await tc.publish_batch([make_record(topic, value) for _ in range(BATCH)])

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return time.perf_counter() - t0


def _one_percent(n: int) -> str:
    return "rare" if n % 100 == 0 else "common"


async def _read_topic(tc: TopicClient, topic: str) -> tuple[int, float]:
    t0 = time.perf_counter()
    count = 0
    index, position, inclusive = 1, None, True
    while True:
        page = await tc.read(
            topic, from_index=index, from_position=position, inclusive=inclusive, limit=1000
        )
        count += len(page.records)
        if not page.more or not page.records:
            return count, time.perf_counter() - t0
        last = page.records[-1].id
        index, position, inclusive = last.index, last.position, False


async def _round(out: dict[str, list[float]]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-topics-") as tmp, PeerCluster(Path(tmp)) as c:
        c.start()
        c.wait_leader()
        async with RaftClient(c.urls, c.ident, timeout=60) as client, TopicClient(client) as tc:
            for name in ("common", "rare"):
                await tc.create_topic(name)
            seconds = await _publish(tc, PUBLISH_BATCHES, lambda n: "common")
            out["publish"].append(PUBLISH_BATCHES * BATCH / seconds)
            have = PUBLISH_BATCHES * BATCH
            await _publish(tc, (SMALL - have) // BATCH, _one_percent)
            n, s = await _read_topic(tc, "rare")
            out["read_small"].append(n / s)
            await _publish(tc, (LARGE - SMALL) // BATCH, _one_percent)
            n, s = await _read_topic(tc, "rare")
            out["read_large"].append(n / s)
            out["rare_large"].append(n)


def run() -> str:
    out: dict[str, list[float]] = {k: [] for k in ("publish", "read_small", "read_large", "rare_large")}
    for n in range(RUNS):
        print(f"   round {n + 1}/{RUNS}", flush=True)
        asyncio.run(_round(out))
    med = {k: statistics.median(v) for k, v in out.items()}
    return "\n".join(
        [
            "## Topics",
            "",
            f"Three raftlog peers; medians of {RUNS} rounds. `publish_batch` of {BATCH} records",
            f"of 100 B, {IN_FLIGHT} batches in flight, every batch one durable committed entry.",
            "Filtered read: `TR` pages of 1000 records of a topic holding 1% of the records,",
            "served by the topic index.",
            "",
            "| measure | value |",
            "|---|---:|",
            f"| publish_batch, records/s | {med['publish']:,.0f} |",
            f"| filtered read (1% topic), log of {SMALL:,} records, records/s "
            f"| {med['read_small']:,.0f} |",
            f"| filtered read (1% topic), log of {LARGE:,} records, records/s "
            f"| {med['read_large']:,.0f} |",
            f"| ratio large/small (1.0 = independent of log size) "
            f"| {med['read_large'] / med['read_small']:.2f} |",
            "",
        ]
    )
