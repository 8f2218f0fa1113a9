"""Consumer-group benchmark (issue #27): queue throughput with 1, 4 and 16 members, the stream
consume rate, and push latency publish -> consumer at 1 in flight.

- queue: ``QUEUE_RECORDS`` 100-byte records in a topic, then M members (coroutines on one
  ``TopicClient``) lease ``BATCH`` at a time and ack each batch with one command, until every
  record is acked; records/s from the first lease to the last ack.
- stream: a ``Consumer`` on a stream group reads ``STREAM_RECORDS`` records and acks each
  (a commit per batch of ``BATCH``); records/s.
- push latency: a ``TF`` fetch waits on a follower (``wait``, ``min_records`` 1) while one
  record is published; the time from the publish call to the fetch's answer, ``PUSHES``
  times, one at a time: p50 and p99.

Everything runs on one machine: the load generator shares the cores with the peers.
Environment: ``RAFTLOG_BENCH_ROUNDS`` (3), ``RAFTLOG_BENCH_QUEUE_RECORDS`` (3000),
``RAFTLOG_BENCH_STREAM_RECORDS`` (5000), ``RAFTLOG_BENCH_PUSHES`` (300).
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

from raftlog.client import RaftClient  # noqa: E402
from raftlog.topics.client import TopicClient, make_record  # noqa: E402
from raftlog.topics.groups.consumer import Consumer  # noqa: E402

ROUNDS = int(os.environ.get("RAFTLOG_BENCH_ROUNDS", "3"))
QUEUE_RECORDS = int(os.environ.get("RAFTLOG_BENCH_QUEUE_RECORDS", "3000"))
STREAM_RECORDS = int(os.environ.get("RAFTLOG_BENCH_STREAM_RECORDS", "5000"))
PUSHES = int(os.environ.get("RAFTLOG_BENCH_PUSHES", "300"))
MEMBERS = (1, 4, 16)
BATCH = 50
PAYLOAD = b"v" * 100


async def _fill(topics: TopicClient, topic: str, count: int) -> None:
    await topics.create_topic(topic, exist_ok=True)
    for start in range(0, count, 500):
        n = min(500, count - start)
        await topics.publish_batch([make_record(topic, PAYLOAD) for _ in range(n)])


async def _queue(topics: TopicClient, tag: str, members: int) -> float:
    topic, group = f"q-{tag}-{members}", f"g-{tag}-{members}"
    await _fill(topics, topic, QUEUE_RECORDS)
    await topics.create_group(group, mode="queue", topics=[topic], max_in_flight=BATCH)
    acked = [0]

    async def member(name: str) -> None:
        while acked[0] < QUEUE_RECORDS:
            leased = await topics.lease(group, name, BATCH)
            if not leased:
                await asyncio.sleep(0.005)
                continue
            await topics.ack(group, name, [(x.topic, x.id) for x in leased])
            acked[0] += len(leased)

    t0 = time.perf_counter()
    await asyncio.gather(*(member(f"m{n}") for n in range(members)))
    return QUEUE_RECORDS / (time.perf_counter() - t0)


async def _stream(topics: TopicClient, tag: str) -> float:
    topic, group = f"s-{tag}", f"sg-{tag}"
    await _fill(topics, topic, STREAM_RECORDS)
    await topics.create_group(group, mode="stream", topics=[topic])
    t0 = time.perf_counter()
    async with Consumer(topics, group, batch=BATCH * 4) as consumer:
        for _ in range(STREAM_RECORDS):
            message = await consumer.next_message(timeout=30)
            assert message is not None
            await message.ack()
    return STREAM_RECORDS / (time.perf_counter() - t0)


async def _push(topics: TopicClient, tag: str, url: str) -> list[float]:
    topic = f"p-{tag}"
    await topics.create_topic(topic, exist_ok=True)
    first = await topics.publish(topic, PAYLOAD)
    start = (first.index, first.position + 1)
    out = []
    for _ in range(PUSHES):
        fetch = asyncio.create_task(topics.fetch(
            topic, url, from_index=start[0], from_position=start[1], wait_ms=10_000))
        await asyncio.sleep(0.002)  # let the fetch reach the peer and park
        t0 = time.perf_counter()
        await topics.publish(topic, PAYLOAD)
        result = await fetch
        out.append((time.perf_counter() - t0) * 1000)
        last = result.records[-1].id
        start = (last.index, last.position + 1)
    return out


async def _measure(c: PeerCluster, tag: str) -> dict[str, float]:
    leader = c.wait_stable_leader()
    follower = next(p for p in c.peers if p != leader)
    async with RaftClient(c.urls, c.ident, timeout=30.0) as raft, TopicClient(raft) as topics:
        out = {f"queue_{m}": await _queue(topics, tag, m) for m in MEMBERS}
        out["stream"] = await _stream(topics, tag)
        latencies = sorted(await _push(topics, tag, c.peers[follower].url))
        out["push_p50"] = statistics.median(latencies)
        out["push_p99"] = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return out


def run() -> str:
    """The Markdown section (medians of ``ROUNDS`` rounds on one fresh cluster each)."""
    rounds = []
    for n in range(ROUNDS):
        print(f"   round {n + 1}/{ROUNDS}", flush=True)
        with tempfile.TemporaryDirectory() as tmp, PeerCluster(Path(tmp)) as c:
            c.start()
            rounds.append(asyncio.run(_measure(c, str(n))))

    def med(key: str) -> float:
        return statistics.median(r[key] for r in rounds)

    lines = [
        "## Consumer groups (issue #27)",
        "",
        f"Three peers on this machine, load generator included; medians of {ROUNDS} rounds. "
        f"Queue: {QUEUE_RECORDS} records of 100 bytes, members lease {BATCH} and ack each "
        f"batch with one command. Stream: {STREAM_RECORDS} records through a `Consumer`. "
        f"Push: {PUSHES} single publishes, each awaited by a `TF` fetch parked on a follower.",
        "",
        "| measure | value |",
        "|---|---|",
    ]
    for m in MEMBERS:
        lines.append(f"| queue, {m} member(s) | {med(f'queue_{m}'):,.0f} records/s |")
    lines.append(f"| stream consume | {med('stream'):,.0f} records/s |")
    lines.append(f"| push latency p50 | {med('push_p50'):.2f} ms |")
    lines.append(f"| push latency p99 | {med('push_p99'):.2f} ms |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run())
