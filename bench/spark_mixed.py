"""Issue #31's mixed data set for the Spark bench: plain topics of very different entry
sizes, committed transactions, a rolled-back one and raw entries -- and its columnar loop.

At ``RAFTLOG_BENCH_SPARK_MIXED_SCALE`` = 1 it is the issue's set: topics of 600,000 /
250,000 / 50,000 / 3,000 records (500 / 100 / 10 / 1 records per entry), ``COMMITS`` = 20
committed transactions of 2,000 records (stores of up to 500, topics alternating), one
rolled back, 30,000 raw entries -- 973,000 rows, 4.1% of them transactional. That is the
default (0.5 was until the commit rows were cut to plain-record cost: at half the rows,
Spark's fixed cost per job -- ~0.3 s of scheduling, the ``tiny`` job of the report --
weighed as much as a third of the loop's time); the transaction count stays 20 at every
scale. Entries are published concurrently in a shuffled order, the
transactions spread over the load, so stores interleave with plain entries.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from dataclasses import dataclass
from typing import Final

from integration.cluster import PeerCluster
from raftlog_spark.columns import record_columns
from raftlog_spark.rows import KIND_OFFSET

from raftlog.client import IndexedEntry, RaftClient
from raftlog.topics.client import TopicClient
from raftlog.topics.records import KIND_RECORDS, MAGIC, Record, RecordBatch, encode_records
from raftlog.topics.records_tx import TxControl, TxStore, decode_any_entry

SCALE = float(os.environ.get("RAFTLOG_BENCH_SPARK_MIXED_SCALE", "1.0"))
PLAIN: Final = {"m0": (600_000, 500), "m1": (250_000, 100), "m2": (50_000, 10), "m3": (3_000, 1)}
"""topic: (records at scale 1, records per entry)."""
COMMITS: Final = 20
TX_RECORDS = max(1, int(2_000 * SCALE))
STORE_RECORDS: Final = 500
RAW = int(30_000 * SCALE)
VALUE = b"w" * 100
IN_FLIGHT: Final = 32


@dataclass(frozen=True)
class MixedSet:
    first: int
    """The first index of the set (read with ``startingIndex``)."""
    counts: Counter[str | None]
    """Rows per topic (None: raw entries)."""
    load_s: float

    @property
    def rows(self) -> int:
        return sum(self.counts.values())

    @property
    def tx_records(self) -> int:
        return COMMITS * TX_RECORDS


def _plain_entries() -> list[bytes]:
    out: list[bytes] = []
    for topic, (records, per_entry) in PLAIN.items():
        left = max(1, int(records * SCALE))
        while left:
            n = min(per_entry, left)
            out.append(encode_records([Record(topic, VALUE, None, {}, 1_700_000_000_000)] * n))
            left -= n
    out.extend(b"raw-%08d" % n + VALUE for n in range(RAW))
    random.Random(31).shuffle(out)
    return out


def expected_counts() -> Counter[str | None]:
    counts: Counter[str | None] = Counter()
    for topic, (records, _) in PLAIN.items():
        counts[topic] += max(1, int(records * SCALE))
    for n in range(COMMITS):
        counts[f"m{n % 2}"] += TX_RECORDS
    counts[None] += RAW
    return counts


async def _transactions(topics: TopicClient, gate: asyncio.Queue[bytes]) -> None:
    """``COMMITS`` committed transactions and one rolled back, spread over the load."""
    total = gate.qsize()
    for n in range(COMMITS + 1):
        while gate.qsize() > total * (COMMITS + 1 - n) / (COMMITS + 2):
            await asyncio.sleep(0.01)
        tx = await topics.begin_transaction(timeout=600)
        left = TX_RECORDS
        while left:
            k = min(STORE_RECORDS, left)
            await tx.store(f"m{n % 2}", [VALUE] * k)
            left -= k
        if n == COMMITS // 2:
            await tx.rollback()  # the rolled-back one, in the middle
        else:
            await tx.commit()


def load(cluster: PeerCluster) -> MixedSet:
    """Publish the set after everything already in the log; its first index and counts."""

    async def run() -> int:
        async with RaftClient(cluster.urls, cluster.ident, timeout=60.0) as client:
            topics = TopicClient(client)
            for topic in PLAIN:
                await topics.create_topic(topic, exist_ok=True)
            first = (await client.request_log_info()).commit_index + 1
            queue: asyncio.Queue[bytes] = asyncio.Queue()
            for data in _plain_entries():
                queue.put_nowait(data)

            async def worker() -> None:
                while not queue.empty():
                    await client.request_update(queue.get_nowait())

            workers = (worker() for _ in range(IN_FLIGHT))
            await asyncio.gather(_transactions(topics, queue), *workers)
            return first

    started = time.perf_counter()
    first = asyncio.run(run())
    return MixedSet(first, expected_counts(), time.perf_counter() - started)


def columnar_loop(cluster: PeerCluster, first: int) -> tuple[float, Counter[str | None]]:
    """The plain Python baseline from ``first`` on: the asyncio client streams every entry,
    plain record batches decoded with ``record_columns`` (the tasks' decoder), a
    transaction's stores kept per transaction id until its commit (counted then) or its
    rollback (dropped), raw entries counted under None."""

    async def run() -> Counter[str | None]:
        counts: Counter[str | None] = Counter()
        open_tx: dict[str, list[Record]] = {}
        async with RaftClient(cluster.urls, cluster.ident, timeout=60.0) as client:
            async for item in client.request_entries(first - 1):
                if not isinstance(item, IndexedEntry) or not item.entry.is_state:
                    continue
                data = item.entry.data
                if data[:4] != MAGIC:
                    counts[None] += 1
                    continue
                if data[KIND_OFFSET] == KIND_RECORDS:
                    columns = record_columns(data)
                    if columns is not None:
                        counts.update(columns[0])
                        continue
                entry = decode_any_entry(data)
                if isinstance(entry, RecordBatch):
                    counts.update(r.topic for r in entry.records)
                elif isinstance(entry, TxStore):
                    open_tx.setdefault(entry.txid, []).extend(entry.records)
                elif isinstance(entry, TxControl) and entry.op in ("commit", "rollback"):
                    stored = open_tx.pop(entry.txid, [])
                    if entry.op == "commit":
                        counts.update(r.topic for r in stored)
        return counts

    started = time.perf_counter()
    counts = asyncio.run(run())
    return time.perf_counter() - started, counts


MIXED_JOBS: Final = {
    "columnar": "asyncio loop, `record_columns` + stores kept to their commit",
    "count": "Spark `count()`",
    "group": "Spark `groupBy(topic).count()`",
    "tiny": "Spark `count()` of 10 entries (the fixed cost of a job)",
}
TINY_ENTRIES: Final = 10


def report(
    mixed: MixedSet,
    jobs: dict[str, list[float]],
    balance: dict[str, list[int]],
    target: float,
    partitions: int,
) -> list[str]:
    """The Markdown lines of the mixed set's section."""
    import statistics  # noqa: PLC0415

    wall = {k: statistics.median(runs) for k, runs in jobs.items()}
    loop = wall["columnar"]

    def line(key: str) -> str:
        ratio = wall[key] / loop
        rounds = ", ".join(f"{w / r:.2f}" for w, r in zip(jobs[key], jobs["columnar"], strict=True))
        verdict = "" if key in ("columnar", "tiny") else ("yes" if ratio <= target else "**no**")
        speed = "--" if key == "tiny" else f"{mixed.rows / wall[key]:,.0f}"
        return (
            f"| {MIXED_JOBS[key]} | {wall[key]:.2f} | {speed} "
            f"| {ratio:.2f} | {rounds} | {verdict} |"
        )

    def spread(rows: list[int]) -> str:
        mean = sum(rows) / len(rows)
        sizes = ", ".join(f"{r:,}" for r in rows)
        return f"{len(rows)} partitions: {sizes} rows; max / mean {max(rows) / mean:.2f}"

    plain = sum(max(1, int(n * SCALE)) for n, _ in PLAIN.values())
    return [
        "",
        "### Issue #31's mixed set: transactions, raw entries, uneven entries",
        "",
        f"{mixed.rows:,} rows (scale {SCALE:g}, `RAFTLOG_BENCH_SPARK_MIXED_SCALE`): {plain:,} "
        f"plain records in 4 topics of 500 / 100 / 10 / 1 records per entry, {COMMITS} "
        f"committed transactions of {TX_RECORDS:,} records ({mixed.tx_records:,} = "
        f"{100 * mixed.tx_records / mixed.rows:.1f}% of the rows), one rolled back, {RAW:,} raw "
        f"entries; published concurrently in shuffled order (load: {mixed.load_s:.1f} s). "
        f"Spark reads from the set's first index, {partitions} partitions; ratios = Spark / "
        f"the columnar loop, medians of {len(jobs['columnar'])}, target <= {target}. The last "
        f"row reads only the set's first {TINY_ENTRIES} entries: what any job costs Spark "
        "(planning, scheduling, task launch), whatever it reads. The commits' rows are built "
        "from the stores the tasks' own streams pass (issue #31), as columns like plain "
        "records.",
        "",
        "| job | seconds | rows/s | / columnar loop | each round | within target |",
        "|---|---:|---:|---:|---|---|",
        *(line(key) for key in MIXED_JOBS),
        "",
        "Partition balance on this set (target: max <= 1.1 x mean):",
        "",
        *(f"- {name}: {spread(rows)}" for name, rows in balance.items()),
    ]
