"""Kafka clients nobody here wrote against the listener (issue #30): kcat, confluent-kafka
(librdkafka), kafka-python and aiokafka produce, consume and read metadata; every codec
round-trips; native and Kafka publishes interleave in one order; Kafka-style errors."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic
from kafka import KafkaConsumer, KafkaProducer

from integration.cluster import PeerCluster, module_cluster, wait_for
from raftlog.kafka.offsets import offset_of
from raftlog.topics.records import LoggedRecord

from .helpers import bootstrap, consume_all, kcat, native, needs_kcat, start_kafka_cluster

pytestmark = pytest.mark.timeout(180)


cluster = module_cluster(start_kafka_cluster, "kafka")


def _topic(cluster: PeerCluster, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    with native(cluster) as topics:
        topics.create_topic(name)
    return name


@needs_kcat
def test_kcat_lists_produces_and_consumes(cluster: PeerCluster) -> None:
    topic = _topic(cluster, "orders")
    any_peer = bootstrap(cluster, "2")  # any listener bootstraps; Metadata names the leader
    listing = kcat("-b", any_peer, "-L").decode()
    assert f'topic "{topic}" with 1 partitions' in listing
    assert "3 brokers" in listing
    lines = b"".join(b"%d\n" % n for n in range(1, 1001))
    kcat("-P", "-b", any_peer, "-t", topic, stdin=lines)
    out = kcat("-C", "-b", any_peer, "-t", topic, "-o", "beginning", "-e", "-q")
    assert out.splitlines() == [b"%d" % n for n in range(1, 1001)]
    # the records are ordinary raftlog records: a native reader sees the same 1,000
    with native(cluster) as topics:
        info = topics.describe(topic)
        assert info.first is not None and info.last is not None
    # ListOffsets: earliest and latest are the first record's offset and one past the last
    query = kcat("-Q", "-b", any_peer, "-t", f"{topic}:0:-2").decode()
    assert str(offset_of(info.first)) in query
    query = kcat("-Q", "-b", any_peer, "-t", f"{topic}:0:-1").decode()
    assert str(offset_of(info.last) + 1) in query


def test_confluent_kafka_keys_headers_timestamps_and_metadata(cluster: PeerCluster) -> None:
    topic = _topic(cluster, "ck")
    conf = {"bootstrap.servers": bootstrap(cluster)}
    admin = AdminClient(conf)

    def naming_a_leader() -> ClusterMetadata | None:
        # LEADER_NOT_AVAILABLE (leader -1) is Kafka's "ask again", and every client does: a
        # listener says so while its peer knows no leader, as for a moment around an election
        # on a loaded machine (seen once in a CI-like run with a CPU hog)
        meta = admin.list_topics(topic, timeout=20)
        return meta if meta.topics[topic].partitions[0].leader >= 0 else None

    meta = wait_for("Metadata naming the partition's leader", naming_a_leader, timeout=30)
    assert meta.topics[topic].error is None
    assert len(meta.topics[topic].partitions) == 1
    assert meta.topics[topic].partitions[0].leader == int(cluster.wait_leader())
    producer = Producer({**conf, "acks": "all", "linger.ms": 5})
    for n in range(50):
        producer.produce(topic, value=b"v%d" % n, key=b"k%d" % (n % 3),
                         headers=[("h", b"x%d" % n), ("n", str(n).encode())],
                         timestamp=1_700_000_000_000 + n)
    assert producer.flush(30) == 0
    got = consume_all(conf, topic, 50)
    assert [m.value() for m in got] == [b"v%d" % n for n in range(50)]
    assert [m.key() for m in got] == [b"k%d" % (n % 3) for n in range(50)]
    assert got[7].headers() == [("h", b"x7"), ("n", b"7")]
    assert got[7].timestamp()[1] == 1_700_000_000_007
    offsets = [m.offset() for m in got]
    assert offsets == sorted(offsets) and len(set(offsets)) == 50
    with native(cluster) as topics:  # the same records, natively: key, headers, timestamp
        records = topics.read(topic, limit=100).records
    assert [r.record.value for r in records] == [b"v%d" % n for n in range(50)]
    assert records[7].record.headers == {"h": b"x7", "n": b"7"}
    assert records[7].record.timestamp_ms == 1_700_000_000_007
    assert [offset_of(r.id) for r in records] == offsets


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_every_compression_codec_round_trips(cluster: PeerCluster, codec: str) -> None:
    topic = _topic(cluster, codec)
    conf = {"bootstrap.servers": bootstrap(cluster)}
    producer = Producer({**conf, "compression.type": codec, "linger.ms": 20})
    values = [(b"%s-%d-" % (codec.encode(), n)) * 20 for n in range(300)]
    for value in values:
        producer.produce(topic, value=value, key=b"k")
    assert producer.flush(30) == 0
    assert [m.value() for m in consume_all(conf, topic, 300)] == values


def test_kafka_python_produces_consumes_and_lists(cluster: PeerCluster) -> None:
    topic = _topic(cluster, "kp")
    servers = bootstrap(cluster).split(",")
    producer = KafkaProducer(bootstrap_servers=servers, acks="all")
    for n in range(20):
        producer.send(topic, value=b"kp%d" % n, key=b"key", headers=[("a", b"b")])
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=servers, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=20_000)
    try:
        assert topic in consumer.topics()
        got = []
        for msg in consumer:
            got.append(msg)
            if len(got) == 20:
                break
    finally:
        consumer.close()
    assert [m.value for m in got] == [b"kp%d" % n for n in range(20)]
    assert got[0].headers == [("a", b"b")] and got[0].key == b"key"


def test_aiokafka_produces_and_consumes(cluster: PeerCluster) -> None:
    topic = _topic(cluster, "aio")
    servers = bootstrap(cluster)

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=servers, acks="all")
        await producer.start()
        try:
            for n in range(20):
                await producer.send_and_wait(topic, b"aio%d" % n, key=b"k")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=servers,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for msg in consumer:
                    got.append(msg.value)
                    if len(got) == 20:
                        break
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == [b"aio%d" % n for n in range(20)]


def test_native_and_kafka_publishes_interleave_in_one_order(cluster: PeerCluster) -> None:
    topic = _topic(cluster, "mixed")
    conf = {"bootstrap.servers": bootstrap(cluster)}
    producer = Producer({**conf, "acks": "all", "linger.ms": 0})
    sent: list[bytes] = []
    with native(cluster) as topics:
        for n in range(20):
            if n % 2:
                topics.publish(topic, b"native-%d" % n, key=b"n", headers={"via": b"native"})
            else:
                producer.produce(topic, value=b"kafka-%d" % n, key=b"k")
                assert producer.flush(20) == 0
            sent.append(b"%s-%d" % (b"native" if n % 2 else b"kafka", n))
        natively = [r.record.value for r in topics.read(topic, limit=100).records]
    via_kafka = consume_all(conf, topic, 20)
    assert natively == sent
    assert [m.value() for m in via_kafka] == sent
    assert via_kafka[1].headers() == [("via", b"native")]


def test_kafka_errors(cluster: PeerCluster) -> None:
    conf = {"bootstrap.servers": bootstrap(cluster)}
    # auto-create is off: an unknown topic is UNKNOWN_TOPIC_OR_PARTITION, nothing created
    failures: list[KafkaError] = []
    producer = Producer({**conf, "message.timeout.ms": 3000})
    producer.produce("no-such-topic", b"x", on_delivery=lambda err, _msg: failures.append(err))
    producer.flush(20)
    assert failures and failures[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART,
                                               KafkaError._MSG_TIMED_OUT)
    with native(cluster) as topics:
        assert "no-such-topic" not in topics.list_topics()
        topics.create_topic("small", max_record_bytes=100)
    # a record over the topic's limit: MESSAGE_TOO_LARGE, refused before the log
    failures.clear()
    producer.produce("small", b"x" * 500, on_delivery=lambda err, _msg: failures.append(err))
    producer.flush(20)
    assert failures and failures[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    # CreateTopics with two partitions is refused clearly
    admin = AdminClient(conf)  # kept alive until the answer came
    futures = admin.create_topics([NewTopic("two-parts", 2, 1)])
    with pytest.raises(KafkaException, match="one partition"):
        futures["two-parts"].result(20)


def test_list_offsets_by_time(cluster: PeerCluster) -> None:
    topic = _topic(cluster, "bytime")
    with native(cluster) as topics:
        topics.publish(topic, b"early")
        early = topics.read(topic).records[0]

        def later() -> LoggedRecord | None:  # a record appended in a later millisecond
            topics.publish(topic, b"late")
            last = topics.read(topic, limit=1000).records[-1]
            return last if last.append_time_ms > early.append_time_ms else None

        late = wait_for("a later append time", later)
        records = topics.read(topic, limit=1000).records
    expected = next(r for r in records if r.append_time_ms >= late.append_time_ms)
    consumer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "t"})
    try:
        found = consumer.offsets_for_times(
            [TopicPartition(topic, 0, late.append_time_ms)], timeout=20)
        after = consumer.offsets_for_times(
            [TopicPartition(topic, 0, late.append_time_ms + 3_600_000)], timeout=20)
    finally:
        consumer.close()
    assert found[0].offset == offset_of(expected.id)  # the first appended at or after it
    assert after[0].offset == -1  # none yet


def _group_consumer(cluster: PeerCluster, group: str, **extra: object) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, **extra})


def _drain(consumer: Consumer, until: int, timeout: float = 60) -> list[bytes]:
    got: list[bytes] = []

    def more() -> bool:
        for msg in consumer.consume(num_messages=500, timeout=0.5):
            if msg.error() is None:
                got.append(bytes(msg.value() or b""))
        return len(got) >= until

    wait_for(f"{until} messages", more, timeout=timeout)
    return got


def test_consumer_group_commits_restarts_and_resumes(cluster: PeerCluster) -> None:
    topic = _topic(cluster, "grouped")
    producer = Producer({"bootstrap.servers": bootstrap(cluster), "linger.ms": 5})
    for n in range(1000):
        producer.produce(topic, b"%d" % n)
    assert producer.flush(30) == 0
    group = f"g-{uuid.uuid4().hex[:6]}"
    consumer = _group_consumer(cluster, group)
    consumer.subscribe([topic])
    try:
        assert _drain(consumer, 1000) == [b"%d" % n for n in range(1000)]
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()  # LeaveGroup
    # the committed offset is the raftlog stream group's position, durable in the log
    with native(cluster) as topics:
        positions = topics.group_positions(group)
    assert topic in positions
    for n in range(1000, 1010):
        producer.produce(topic, b"%d" % n)
    assert producer.flush(30) == 0
    again = _group_consumer(cluster, group)
    again.subscribe([topic])
    try:  # resumes after the commit: nothing old, only the ten new
        assert _drain(again, 10) == [b"%d" % n for n in range(1000, 1010)]
        assert again.consume(num_messages=10, timeout=1.0) == []
    finally:
        again.close()


def test_two_group_members_share_the_one_partition(cluster: PeerCluster) -> None:
    topic = _topic(cluster, "shared")
    group = f"s-{uuid.uuid4().hex[:6]}"
    first, second = _group_consumer(cluster, group), _group_consumer(cluster, group)
    try:
        first.subscribe([topic])
        second.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (first.assignment() or second.assignment()):
            first.poll(0.2)
            second.poll(0.2)
        owners = [c for c in (first, second) if c.assignment()]
        assert len(owners) == 1  # one partition: one member owns it, the other idles
    finally:
        first.close()
        second.close()


def test_kafka_python_and_aiokafka_groups_commit_and_resume(cluster: PeerCluster) -> None:
    """The other clients' group protocol versions (JoinGroup, OffsetCommit, OffsetFetch):
    kafka-python commits, aiokafka in the same group resumes after it."""
    topic = _topic(cluster, "pygroups")
    group = f"py-{uuid.uuid4().hex[:6]}"
    servers = bootstrap(cluster)
    with native(cluster) as topics:
        for n in range(10):
            topics.publish(topic, b"%d" % n)
    consumer = KafkaConsumer(topic, bootstrap_servers=servers.split(","), group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=20_000)
    try:
        got = []
        for msg in consumer:
            got.append(msg.value)
            if len(got) == 6:
                break
        consumer.commit()  # up to the sixth
    finally:
        consumer.close()
    assert got == [b"%d" % n for n in range(6)]

    async def resume() -> list[bytes]:
        aio = AIOKafkaConsumer(topic, bootstrap_servers=servers, group_id=group,
                               auto_offset_reset="earliest", enable_auto_commit=False)
        await aio.start()
        out: list[bytes] = []
        try:
            async with asyncio.timeout(40):
                async for msg in aio:
                    out.append(msg.value)
                    if len(out) == 4:
                        break
            await aio.commit()
        finally:
            await aio.stop()
        return out

    assert asyncio.run(resume()) == [b"%d" % n for n in range(6, 10)]
    with native(cluster) as topics:
        position = topics.group_positions(group)[topic]
    assert offset_of(position.next_record) > 0
