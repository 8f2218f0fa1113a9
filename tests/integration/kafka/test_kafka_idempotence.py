"""A librdkafka idempotent producer sends 100,000 messages while the Raft leader is killed
with -9 (twice): every message is in the topic exactly once, in order (issue #30).

Why it holds: each batch is published with a request id derived from (producer id, epoch,
base sequence) (``raftlog.kafka.produce``); librdkafka retries a batch whose answer it
never got with the same sequence, to the new leader's listener, and raftlog's replicated
request-id deduplication appends it at most once."""

from __future__ import annotations

import os

import pytest
from confluent_kafka import KafkaError, Message, Producer

from integration.cluster import PeerCluster, module_cluster, wait_for

from .helpers import bootstrap, consume_all, native, start_kafka_cluster

pytestmark = pytest.mark.timeout(300)
COUNT = int(os.environ.get("RAFTLOG_KAFKA_IDEMPOTENCE_COUNT", "100000"))
KILLS = 2


cluster = module_cluster(start_kafka_cluster, "kafka-idem")


def test_idempotent_producer_survives_leader_kill_exactly_once(cluster: PeerCluster) -> None:
    topic = "exactly-once"
    with native(cluster) as topics:
        topics.create_topic(topic)
    conf = {"bootstrap.servers": bootstrap(cluster)}
    producer = Producer({**conf, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": 120_000, "retry.backoff.ms": 50,
                         "queue.buffering.max.messages": 20_000})
    delivered: list[int] = []
    failed: list[KafkaError] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            delivered.append(int(msg.value() or b"-1"))
        else:
            failed.append(err)

    victims: list[str] = []

    def maybe_kill() -> None:
        """Kill the leader at a third and at two thirds of the deliveries (restarting the
        first victim before the second kill, so a majority stays up)."""
        due = (len(victims) + 1) * COUNT // (KILLS + 1)
        if len(victims) < KILLS and len(delivered) >= due:
            if victims:
                cluster.start(victims[-1])
            leader = cluster.wait_leader(exclude=victims[-1] if victims else None)
            cluster.kill(leader)  # SIGKILL: in-flight batches have no answer
            victims.append(leader)

    for n in range(COUNT):
        while True:
            try:
                producer.produce(topic, b"%07d" % n, on_delivery=report)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.05)
                maybe_kill()
        producer.poll(0)
        maybe_kill()
    while len(victims) < KILLS and len(delivered) < COUNT:  # the queue held the rest
        producer.poll(0.01)
        maybe_kill()
    assert producer.flush(180) == 0
    assert len(victims) == KILLS, "the leaders were not killed mid-stream: raise COUNT"
    assert failed == []
    assert sorted(delivered) == list(range(COUNT))
    survivors = [p for p in cluster.peers if p != victims[-1]]
    got = consume_all({"bootstrap.servers": bootstrap(cluster, *survivors)}, topic, COUNT,
                      timeout=120)
    values = [int(m.value()) for m in got]
    assert len(values) == COUNT, f"{len(values) - len(set(values))} duplicates"
    assert values == list(range(COUNT))  # exactly once, and in the order produced
    with native(cluster) as topics:  # nothing beyond the COUNT records either
        info = topics.describe(topic)
    assert info.last is not None
    assert wait_for("the consumer saw the last record", lambda: got[-1].offset() >= 0)
