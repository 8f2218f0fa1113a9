"""Topics benchmark: durable publish_batch throughput, and topic-filtered reads that must not
slow down as the log grows (the topic index, not a scan, serves them).

- publish: batches of 100 records of 100 B, ``IN_FLIGHT`` batches outstanding, on a fresh
  three-peer cluster; records/s (each batch is one fsync'd, majority-committed entry).
- filtered read: a topic holding 1% of the records, read back with ``TR`` pages of 1000,
  measured on a log of ``SMALL`` records and again after growing it to ``LARGE``; the ratio
  large/small shows whether the rate depends on the log's size.
- disk use of a compacted cluster holding a retained topic (issue #11): plain updates, then
  a seven-day topic, then more plain updates; ``raftlog-admin compact``'s RPC on every peer;
  the bytes of one follower's log, snapshot and topic index before and after, and whether
  every topic record is still readable.
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

from bench.procstat import load_average, total_cpu  # noqa: E402
from raftlog.client import RaftClient  # noqa: E402
from raftlog.topics.client import TopicClient, make_record  # noqa: E402

RUNS = int(os.environ.get("RAFTLOG_BENCH_ROUNDS", "3"))
BATCH = 100
IN_FLIGHT = 16
PUBLISH_BATCHES = 500
BIG_BATCH = 1000
BIG_IN_FLIGHT = 8
BIG_BATCHES = 150
SMALL = 100_000
LARGE = 400_000


async def _publish(
    tc: TopicClient,
    batches: int,
    topic_of: Callable[[int], str],
    *,
    random: bool = False,
    batch: int = BATCH,
    in_flight: int = IN_FLIGHT,
) -> float:
    """Seconds to publish ``batches`` batches of ``batch`` records; batch n goes to topic
    ``topic_of(n)`` (producers batch per topic, as with Kafka)."""
    value = os.urandom(100) if random else b"v" * 100
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(batches):
        queue.put_nowait(n)

    async def worker() -> None:
        while not queue.empty():
            topic = topic_of(queue.get_nowait())
            await tc.publish_batch([make_record(topic, value) for _ in range(batch)])

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
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
            cpu = total_cpu(c.pids())
            seconds = await _publish(tc, PUBLISH_BATCHES, lambda n: "common")
            out["publish"].append(PUBLISH_BATCHES * BATCH / seconds)
            out["publish_cpu"].append((total_cpu(c.pids()) - cpu) / (PUBLISH_BATCHES * BATCH) * 1e5)
            have = PUBLISH_BATCHES * BATCH
            await _publish(tc, (SMALL - have) // BATCH, _one_percent)
            n, s = await _read_topic(tc, "rare")
            out["read_small"].append(n / s)
            await _publish(tc, (LARGE - SMALL) // BATCH, _one_percent)
            cpu = total_cpu(c.pids())
            n, s = await _read_topic(tc, "rare")
            out["read_cpu"].append((total_cpu(c.pids()) - cpu) / n * 1e5)
            out["read_large"].append(n / s)
            out["rare_large"].append(n)
            cpu, client_cpu = total_cpu(c.pids()), time.process_time()
            seconds = await _publish(
                tc, BIG_BATCHES, lambda n: "common", batch=BIG_BATCH, in_flight=BIG_IN_FLIGHT
            )
            records = BIG_BATCHES * BIG_BATCH
            out["publish_big"].append(records / seconds)
            out["publish_big_cpu"].append((total_cpu(c.pids()) - cpu) / records * 1e5)
            out["publish_big_client_cpu"].append((time.process_time() - client_cpu) / records * 1e5)


DISK_PLAIN = 20_000
DISK_BATCHES = 200


def _bytes_under(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _usage(c: PeerCluster, peer_id: str) -> dict[str, int]:
    data = c.peers[peer_id].data_dir
    return {part: _bytes_under(data / part) for part in ("log", "snapshots", "topics")}


async def _plain(client: RaftClient, count: int) -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(count):
        queue.put_nowait(n)

    async def worker() -> None:
        while not queue.empty():
            queue.get_nowait()
            await client.request_update(os.urandom(100))  # incompressible, like real data

    await asyncio.gather(*(worker() for _ in range(32)))


async def _disk(out: dict[str, object]) -> None:
    raft = {"request_id_ttl": None, "request_id_cache_max": 100}
    with (
        tempfile.TemporaryDirectory(prefix="bench-topics-disk-") as tmp,
        PeerCluster(Path(tmp), raft=raft) as c,
    ):
        c.start()
        leader = c.wait_leader()
        follower = next(p for p in c.peers if p != leader)
        async with RaftClient(c.urls, c.ident, timeout=60) as client, TopicClient(client) as tc:
            await _plain(client, DISK_PLAIN)
            await tc.create_topic("kept", retention_ms=7 * 86_400_000)
            await _publish(tc, DISK_BATCHES, lambda n: "kept", random=True)
            await _plain(client, DISK_PLAIN)
            await asyncio.sleep(2.0)  # request ids pruned to the last 100 (housekeeping)
            out["before"] = _usage(c, follower)
            out["info_before"] = c.log_info(follower)
            out["compacted"] = c.compact_all()
            await asyncio.sleep(1.5)  # the topic index drops its compacted keys (1 s timer)
            out["after"] = _usage(c, follower)
            count, _ = await _read_topic(tc, "kept")
            out["readable"] = count
            out["info_after"] = c.log_info(follower)


def run() -> str:
    out: dict[str, list[float]] = {
        k: []
        for k in (
            "publish",
            "publish_cpu",
            "publish_big",
            "publish_big_cpu",
            "publish_big_client_cpu",
            "read_small",
            "read_large",
            "read_cpu",
            "rare_large",
        )
    }
    load_before = load_average()
    for n in range(RUNS):
        print(f"   round {n + 1}/{RUNS}", flush=True)
        asyncio.run(_round(out))
    med = {k: statistics.median(v) for k, v in out.items()}
    publish_rounds = " / ".join(f"{v:,.0f}" for v in out["publish_big"])
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
            f"| publish_batch of {BIG_BATCH} records, {BIG_IN_FLIGHT} in flight, records/s "
            f"| {med['publish_big']:,.0f} |",
            f"| filtered read (1% topic), log of {SMALL:,} records, records/s "
            f"| {med['read_small']:,.0f} |",
            f"| filtered read (1% topic), log of {LARGE:,} records, records/s "
            f"| {med['read_large']:,.0f} |",
            f"| ratio large/small (1.0 = independent of log size) "
            f"| {med['read_large'] / med['read_small']:.2f} |",
            f"| publish_batch, peer CPU seconds per 100,000 records (3 peers) "
            f"| {med['publish_cpu']:.2f} |",
            f"| publish_batch of {BIG_BATCH}, peer CPU seconds per 100,000 records (3 peers) "
            f"| {med['publish_big_cpu']:.2f} |",
            f"| publish_batch of {BIG_BATCH}, client CPU seconds per 100,000 records "
            f"(make_record, encoding, transport) | {med['publish_big_client_cpu']:.2f} |",
            f"| filtered read (log of {LARGE:,}), peer CPU seconds per 100,000 records "
            f"| {med['read_cpu']:.2f} |",
            "",
            f"publish_batch of {BIG_BATCH} per round: {publish_rounds} records/s. Load average"
            f" (1/5/15 min) before {load_before}, after the publish rounds {load_average()}.",
            "",
            *_disk_section(),
        ]
    )


def _disk_section() -> list[str]:
    disk: dict[str, object] = {}
    asyncio.run(_disk(disk))
    before, after = disk["before"], disk["after"]
    assert isinstance(before, dict) and isinstance(after, dict)
    records = DISK_BATCHES * BATCH

    def mib(n: int) -> str:
        return f"{n / 2**20:.1f}"

    rows = [
        f"| {part} | {mib(before[part])} | {mib(after[part])} |"
        for part in ("log", "snapshots", "topics")
    ]
    total = (sum(before.values()), sum(after.values()))
    held = []
    for key in ("info_before", "info_after"):
        info = disk[key]
        held.append(
            "?"
            if info is None
            else f"{info.last_index - info.first_index + 1:,} "  # type: ignore[attr-defined]
            f"(from {info.first_index:,})"  # type: ignore[attr-defined]
        )
    return [
        "Disk use of a compacted cluster holding a retained topic (one follower's data",
        f"directory): {DISK_PLAIN:,} plain updates of ~100 B, a seven-day topic with",
        f"{records:,} records of 100 B ({DISK_BATCHES} batches), {DISK_PLAIN:,} more plain "
        "updates, then",
        "`raftlog-admin compact` (request ids capped at 100). Compaction stops below the",
        "topic's first record; the topic's records stay readable.",
        "",
        "| MiB | before compact | after compact |",
        "|---|---:|---:|",
        *rows,
        f"| total | {mib(total[0])} | {mib(total[1])} |",
        f"| log entries held | {held[0]} | {held[1]} |",
        "",
        "Values are random bytes (incompressible). RocksDB reclaims the space of dropped log",
        "entries in its background compactions, so the 'after' column can lag.",
        "",
        f"`compact` on the three peers: {disk['compacted']}. Topic records readable after it: "
        f"{disk['readable']:,} of {records:,}.",
        "",
    ]
