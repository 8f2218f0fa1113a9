"""Shared pieces of the Spark source tests: clusters, data, and rows computed without Spark.

``log_rows`` is the reference: it reads the log with the plain client and turns entries into
rows with ``raftlog.topics.record_decode.decode_entry`` -- independently of
``raftlog_spark`` -- so that "the DataFrame equals the log" is checked against code the
source does not share.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from integration.cluster import PeerCluster
from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812
from raftlog_spark.anchors import ANCHOR_TOPIC

from raftlog.client import IndexedEntry, RaftClient, SyncRaftClient
from raftlog.entry import EntryType
from raftlog.topics.client import admin_data
from raftlog.topics.record_decode import decode_entry
from raftlog.topics.records import Record, RecordBatch, encode_records

Row = tuple[Any, ...]
"""(index, position, term, topic, key, value, headers, append ms, producer ms)."""
TOPICS = ("orders", "audit", "metrics.cpu")


def start_cluster(directory: Path, ident: str) -> PeerCluster:
    cluster = PeerCluster(directory, ident=ident, raft={"topic_auto_create": True})
    try:
        cluster.start()
        cluster.wait_stable_leader()
    except BaseException:
        stop_cluster(cluster)
        raise
    return cluster


def stop_cluster(cluster: PeerCluster) -> None:
    try:
        cluster.stop()
    finally:
        for peer in cluster.peers.values():
            if peer.process is not None and peer.process.poll() is None:
                peer.process.kill()
                peer.process.wait(10)


def publish(cluster: PeerCluster, datas: Sequence[bytes], concurrency: int = 16) -> list[int]:
    """Append every data with ``request_update`` (concurrently); their indexes, in order."""

    async def run() -> list[int]:
        async with RaftClient(cluster.urls, cluster.ident, timeout=30.0) as client:
            gate = asyncio.Semaphore(concurrency)

            async def one(data: bytes) -> int:
                async with gate:
                    return await client.request_update(data)

            return list(await asyncio.gather(*(one(d) for d in datas)))

    return asyncio.run(run())


def sample_entries(phase: int, count: int) -> list[bytes]:
    """A mix of raw STATE data and topic record batches (keys, headers, producer times)."""
    out: list[bytes] = []
    for n in range(count):
        if n % 2 == 0:
            out.append(b"raw-%d-%d" % (phase, n) if n % 6 else b"\x93\x01\x02\x03")
            continue
        records = [
            Record(
                TOPICS[(n + k) % len(TOPICS)],
                b"v-%d-%d-%d" % (phase, n, k),
                None if k % 2 else b"key-%d" % n,
                {"src": b"test", "n": b"%d" % n} if k == 1 else {},
                0 if n % 5 == 1 else 1_700_000_000_000 + phase * 1000 + n,
            )
            for k in range(1 + n % 4)
        ]
        out.append(encode_records(records))
    return out


def load_phases(cluster: PeerCluster, phases: int = 4, per_phase: int = 30) -> None:
    """Topics, then ``phases`` groups of entries appended ~0.3 s apart (distinct times)."""
    with SyncRaftClient(cluster.urls, cluster.ident, timeout=30.0) as client:
        client.request_update(admin_data("create", "orders"))
        for phase in range(phases):
            for data in sample_entries(phase, per_phase):
                client.request_update(data)
            time.sleep(0.3)


def log_rows(
    cluster: PeerCluster, first: int = 1, last: int | None = None, *, internal: bool = False
) -> list[Row]:
    """The rows the source must return for entries ``first..last`` (default: all applied)
    when it reads every topic: without the sink's anchor records (``internal``: with them)."""
    with SyncRaftClient(cluster.urls, cluster.ident, timeout=30.0) as client:
        count = None if last is None else last - first + 1
        items = list(client.request_entries(first - 1, count))
    rows: list[Row] = []
    for item in items:
        assert isinstance(item, IndexedEntry), "these tests run without log compaction"
        entry = item.entry
        if entry.entry_type != EntryType.STATE:
            continue
        decoded = decode_entry(entry.data)
        if decoded is None:
            rows.append((item.index, 0, entry.term, None, None, entry.data, {}, None, None))
        elif isinstance(decoded, RecordBatch):
            for position, r in enumerate(decoded.records):
                if r.topic == ANCHOR_TOPIC and not internal:
                    continue
                rows.append(
                    (
                        item.index,
                        position,
                        entry.term,
                        r.topic,
                        r.key,
                        r.value,
                        dict(r.headers),
                        decoded.append_time_ms or None,
                        r.timestamp_ms or None,
                    )
                )
    return rows


def spark_rows(df: DataFrame) -> list[Row]:
    """``df``'s rows as :data:`Row` tuples (times as epoch ms), in log order."""
    selected = df.select(
        "index",
        "position",
        "term",
        "topic",
        "key",
        "value",
        "headers",
        F.unix_millis("timestamp").alias("ts"),
        F.unix_millis("producer_timestamp").alias("pts"),
    )
    rows = [
        (
            index,
            position,
            term,
            topic,
            None if key is None else bytes(key),
            bytes(value),
            {k: bytes(v) for k, v in (headers or {}).items()},
            ts,
            pts,
        )
        for index, position, term, topic, key, value, headers, ts, pts in selected.collect()
    ]
    return sorted(rows, key=lambda row: (row[0], row[1]))


def where(rows: list[Row], keep: Callable[[Row], bool]) -> list[Row]:
    return [row for row in rows if keep(row)]


def last_index(cluster: PeerCluster) -> int:
    with SyncRaftClient(cluster.urls, cluster.ident, timeout=30.0) as client:
        info = client.request_log_info()
    return min(info.commit_index, info.last_applied)
