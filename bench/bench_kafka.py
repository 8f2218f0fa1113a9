"""Kafka listener benchmark (issue #30): a librdkafka (confluent-kafka) producer with
``acks=all`` and batching on (``linger.ms=5``), 100-byte and 1-KiB messages, and a
librdkafka consumer reading the topic from the beginning -- next to the native
``TopicClient`` doing the same work on the same cluster (publishes in batches of 100 from 16
concurrent coroutines; reads of up to 10,000 records a call from the leader).

Every Kafka acknowledgement is the durable commit (fsync on a majority), as a native
publish's is. Everything runs on one machine: clients share the cores with the peers.
Sizes: ``RAFTLOG_BENCH_KAFKA_MESSAGES`` (default 50,000 per run), rounds
``RAFTLOG_BENCH_ROUNDS`` (3); the medians are reported.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from integration.cluster import PeerCluster  # noqa: E402

from raftlog.client import RaftClient  # noqa: E402
from raftlog.topics.client import TopicClient, make_record  # noqa: E402

ROUNDS = int(os.environ.get("RAFTLOG_BENCH_ROUNDS", "3"))
MESSAGES = int(os.environ.get("RAFTLOG_BENCH_KAFKA_MESSAGES", "50000"))
WORKERS = 16
BATCH = 100


def _bootstrap(c: PeerCluster) -> str:
    return ",".join(str(p.kafka_url).removeprefix("tcp://") for p in c.peers.values())


def _kafka_produce(c: PeerCluster, topic: str, size: int) -> float:
    producer = Producer({"bootstrap.servers": _bootstrap(c), "acks": "all", "linger.ms": 5,
                         "enable.idempotence": True, "queue.buffering.max.messages": 200_000})
    value = b"v" * size
    failed: list[object] = []
    t0 = time.perf_counter()
    for _ in range(MESSAGES):
        while True:
            try:
                producer.produce(topic, value, on_delivery=lambda e, _m: e and failed.append(e))
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(600) or failed:
        raise RuntimeError(f"undelivered: {failed[:3]}")
    return MESSAGES / (time.perf_counter() - t0)


def _kafka_consume(c: PeerCluster, topic: str) -> float:
    consumer = Consumer({"bootstrap.servers": _bootstrap(c), "group.id": "bench",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, -2)])
    got = 0
    t0 = time.perf_counter()
    try:
        while got < MESSAGES:
            got += sum(m.error() is None for m in consumer.consume(10_000, timeout=1.0))
    finally:
        consumer.close()
    return got / (time.perf_counter() - t0)


async def _native(c: PeerCluster, topic: str, size: int) -> tuple[float, float]:
    async with RaftClient(c.urls, c.ident, timeout=30) as client, TopicClient(client) as topics:
        value = b"v" * size
        batches = MESSAGES // BATCH
        queue: asyncio.Queue[int] = asyncio.Queue()
        for n in range(batches):
            queue.put_nowait(n)

        async def worker() -> None:
            while not queue.empty():
                queue.get_nowait()
                await topics.publish_batch([make_record(topic, value)] * BATCH)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(WORKERS)))
        publish = batches * BATCH / (time.perf_counter() - t0)
        got, index, position = 0, None, None
        t0 = time.perf_counter()
        while got < batches * BATCH:
            result = await topics.read(topic, from_index=index, from_position=position,
                                       limit=10_000)
            got += len(result.records)
            if result.records:
                last = result.records[-1].id
                index, position = last.index, last.position + 1
        return publish, got / (time.perf_counter() - t0)


def _round(c: PeerCluster, size: int) -> dict[str, float]:
    kafka_topic, native_topic = f"k-{uuid.uuid4().hex[:8]}", f"n-{uuid.uuid4().hex[:8]}"
    asyncio.run(_create(c, kafka_topic, native_topic))
    produce = _kafka_produce(c, kafka_topic, size)
    consume = _kafka_consume(c, kafka_topic)
    publish, read = asyncio.run(_native(c, native_topic, size))
    return {"kafka_produce": produce, "kafka_consume": consume,
            "native_publish": publish, "native_read": read}


async def _create(c: PeerCluster, *names: str) -> None:
    async with RaftClient(c.urls, c.ident, timeout=30) as client, TopicClient(client) as topics:
        for name in names:
            await topics.create_topic(name)


def run() -> str:
    """The Markdown section (medians of ``ROUNDS`` runs per message size)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        c = PeerCluster(Path(tmp), kafka=True)
        c.start()
        try:
            c.wait_stable_leader()
            for size in (100, 1024):
                runs = [_round(c, size) for _ in range(ROUNDS)]
                med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                rows.append(
                    f"| {size} B | {med['kafka_produce']:,.0f} | {med['native_publish']:,.0f} | "
                    f"{med['kafka_produce'] / med['native_publish']:.2f} | "
                    f"{med['kafka_consume']:,.0f} | {med['native_read']:,.0f} |")
        finally:
            c.stop()
    return "\n".join([
        "## Kafka listener (issue #30)",
        "",
        f"{MESSAGES:,} messages per run, median of {ROUNDS}; messages/s. Kafka: librdkafka "
        "(confluent-kafka) idempotent producer, `acks=all`, `linger.ms=5`; consumer from "
        f"the beginning. Native: `TopicClient.publish_batch` of {BATCH} from {WORKERS} "
        "coroutines; `read` of up to 10,000 a call from the leader.",
        "",
        "| message | Kafka produce | native publish | Kafka / native | Kafka consume | "
        "native read |",
        "|---|---|---|---|---|---|",
        *rows,
    ])


if __name__ == "__main__":
    print(run())
