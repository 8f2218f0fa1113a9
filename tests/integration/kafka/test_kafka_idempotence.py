"""A librdkafka idempotent producer sends 100,000 messages while the Raft leader is killed
with -9: every message is in the topic exactly once, in order (issue #30).

Why it holds: each batch is published with a request id derived from (producer id, epoch,
base sequence) (``raftlog.kafka.produce``); librdkafka retries a batch whose answer it
never got with the same sequence, to the new leader's listener, and raftlog's replicated
request-id deduplication appends it at most once."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Message, Producer

from integration.cluster import PeerCluster, wait_for

from .helpers import bootstrap, consume_all, native, start_kafka_cluster

pytestmark = pytest.mark.timeout(300)
COUNT = int(os.environ.get("RAFTLOG_KAFKA_IDEMPOTENCE_COUNT", "100000"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    c = start_kafka_cluster(tmp_path_factory.mktemp("kafka-idem"))
    try:
        yield c
    finally:
        c.stop()


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

    leader = cluster.wait_leader()
    killed = False
    for n in range(COUNT):
        while True:
            try:
                producer.produce(topic, b"%07d" % n, on_delivery=report)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.05)
        producer.poll(0)
        if not killed and len(delivered) >= COUNT // 3:
            cluster.kill(leader)  # SIGKILL: in-flight batches have no answer
            killed = True
    while not killed and len(delivered) < COUNT:  # the queue held the rest: kill now
        producer.poll(0.01)
        if len(delivered) >= COUNT // 3:
            cluster.kill(leader)
            killed = True
    assert producer.flush(180) == 0
    assert killed, "the leader was never killed: raise COUNT"
    assert failed == []
    assert sorted(delivered) == list(range(COUNT))
    new_leader = cluster.wait_leader(exclude=leader)
    assert new_leader != leader
    survivors = [p for p in cluster.peers if p != leader]
    got = consume_all({"bootstrap.servers": bootstrap(cluster, *survivors)}, topic, COUNT,
                      timeout=120)
    values = [int(m.value()) for m in got]
    assert len(values) == COUNT, f"{len(values) - len(set(values))} duplicates"
    assert values == list(range(COUNT))  # exactly once, and in the order produced
    with native(cluster) as topics:  # nothing beyond the COUNT records either
        info = topics.describe(topic)
    assert info.last is not None
    assert wait_for("the consumer saw the last record", lambda: got[-1].offset() >= 0)
