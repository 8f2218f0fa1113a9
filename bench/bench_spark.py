"""Spark benchmark: the ``raftlog`` data source against a plain Python loop over the same log.

A fresh three-peer cluster gets ``RECORDS`` records of 100 B (4 topics), published as topic
batches of ``PER_ENTRY`` records (one entry each: ~57 KB, under the 64 KB RequestEntries
pipelining limit). Then, in one run, medians of ``RUNS``:

- *loop*: ``SyncRaftClient.request_entries`` over the whole log, ``decode_entry`` on every
  entry, records counted per topic -- what a script does without Spark;
- *Spark* (``local[2]``, 4 partitions): ``count()`` and ``groupBy("topic").count()`` on a
  DataFrame freshly loaded for each run (planning included), after one warm-up job.

Both sides decode with the same ``raftlog.records.decode_entry``; the ratio is Spark / loop
wall time (target: at most 1.5). Set ``RAFTLOG_BENCH_SPARK_RECORDS`` for a smaller run.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

import raftlog_spark  # noqa: E402
from integration.cluster import PeerCluster, wait_for  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from raftlog.client import IndexedEntry, RaftClient, SyncRaftClient  # noqa: E402
from raftlog.records import Record, RecordBatch, decode_entry, encode_records  # noqa: E402

RECORDS = int(os.environ.get("RAFTLOG_BENCH_SPARK_RECORDS", "1000000"))
RUNS = int(os.environ.get("RAFTLOG_BENCH_ROUNDS", "3"))
PER_ENTRY = 500
VALUE_SIZE = 100
TOPICS = ("t0", "t1", "t2", "t3")
IN_FLIGHT = 8
PARTITIONS = 4
TARGET_RATIO = 1.5
# Calm elections while 2 cores are saturated by the load (the defaults' 200-300 ms
# timeouts made leaders churn in trial runs; the read path does not depend on them).
RAFT = {"topic_auto_create": True, "election_timeout_min": 1000, "election_timeout_max": 2000}


def _load(cluster: PeerCluster) -> float:
    """Publish every record; seconds taken."""
    value = b"v" * VALUE_SIZE
    entries = -(-RECORDS // PER_ENTRY)

    def data(n: int) -> bytes:
        count = min(PER_ENTRY, RECORDS - n * PER_ENTRY)
        topic = TOPICS[n % len(TOPICS)]
        return encode_records([Record(topic, value, None, {}, 1_700_000_000_000)] * count)

    async def publish() -> None:
        async with RaftClient(cluster.urls, cluster.ident, timeout=60.0) as client:
            queue: asyncio.Queue[int] = asyncio.Queue()
            for n in range(entries):
                queue.put_nowait(n)

            async def worker() -> None:
                while not queue.empty():
                    await client.request_update(data(queue.get_nowait()))

            await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))

    started = time.perf_counter()
    asyncio.run(publish())
    return time.perf_counter() - started


def _loop(cluster: PeerCluster) -> tuple[float, Counter[str]]:
    """The plain Python baseline: read every entry, decode, count per topic."""
    started = time.perf_counter()
    counts: Counter[str] = Counter()
    with SyncRaftClient(cluster.urls, cluster.ident, timeout=60.0) as client:
        for item in client.request_entries(0):
            if not isinstance(item, IndexedEntry):
                continue
            decoded = decode_entry(item.entry.data) if item.entry.is_state else None
            if isinstance(decoded, RecordBatch):
                for record in decoded.records:
                    counts[record.topic] += 1
    return time.perf_counter() - started, counts


def run() -> str:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    base = os.environ.get("RAFTLOG_BENCH_DIR")
    with tempfile.TemporaryDirectory(prefix="raftlog-bench-spark-", dir=base) as tmp:
        cluster = PeerCluster(Path(tmp), ident="raftlog-bench-spark", raft=RAFT)
        spark = None
        try:
            cluster.start()
            cluster.wait_leader()
            load_s = _load(cluster)
            wait_for("a stable leader", cluster.leader, 30)
            spark = (
                SparkSession.builder.master("local[2]")
                .appName("raftlog-bench-spark")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "2")
                .getOrCreate()
            )
            spark.sparkContext.setLogLevel("ERROR")
            raftlog_spark.register(spark)

            def frame() -> object:
                return (
                    spark.read.format("raftlog")
                    .option("peers", ",".join(cluster.urls))
                    .option("ident", cluster.ident)
                    .option("numPartitions", PARTITIONS)
                    .option("timeout", 60)
                    .load()
                )

            # warm-up: JVM, Python workers, the source's first planning
            spark.read.format("raftlog").option("peers", ",".join(cluster.urls)).option(
                "ident", cluster.ident
            ).option("endingIndex", 50).load().groupBy("topic").count().collect()

            loops, counts_s, groups_s = [], [], []
            for _ in range(RUNS):
                seconds, counts = _loop(cluster)
                loops.append(seconds)
                assert sum(counts.values()) == RECORDS, counts

                started = time.perf_counter()
                total = frame().count()  # type: ignore[attr-defined]
                counts_s.append(time.perf_counter() - started)
                assert total == RECORDS, total

                started = time.perf_counter()
                groups = frame().groupBy("topic").count().collect()  # type: ignore[attr-defined]
                groups_s.append(time.perf_counter() - started)
                assert {r["topic"]: r["count"] for r in groups} == dict(counts), groups
        finally:
            if spark is not None:
                spark.stop()
            cluster.stop()
    return _report(load_s, loops, counts_s, groups_s)


def _report(load_s: float, loops: list[float], counts_s: list[float], groups_s: list[float]) -> str:
    loop = statistics.median(loops)
    count = statistics.median(counts_s)
    group = statistics.median(groups_s)

    def line(what: str, seconds: float) -> str:
        ratio = seconds / loop
        verdict = "yes" if ratio <= TARGET_RATIO else "**no**"
        return f"| {what} | {seconds:.2f} | {RECORDS / seconds:,.0f} | {ratio:.2f} | {verdict} |"

    entries = -(-RECORDS // PER_ENTRY)
    return "\n".join(
        [
            "## Spark data source (`raftlog_spark`)",
            "",
            f"{RECORDS:,} records of {VALUE_SIZE} B in {len(TOPICS)} topics, published as "
            f"{entries:,} topic batches of {PER_ENTRY} records (load: {load_s:.1f} s with "
            f"{IN_FLIGHT} in flight). Medians of {RUNS} runs, all in one invocation. *Loop* = "
            "`SyncRaftClient.request_entries` + `decode_entry` + a per-topic `Counter` in one "
            f"Python process; Spark = `local[2]`, {PARTITIONS} partitions, a DataFrame loaded "
            "per run (planning included), after a warm-up job. Ratio = Spark / loop wall time "
            f"(target <= {TARGET_RATIO}).",
            "",
            "| job | seconds | records/s | ratio | within target |",
            "|---|---:|---:|---:|---|",
            f"| Python loop (count per topic) | {loop:.2f} | {RECORDS / loop:,.0f} | 1.00 | |",
            line("Spark `count()`", count),
            line("Spark `groupBy(topic).count()`", group),
        ]
    )


if __name__ == "__main__":
    print(run())
