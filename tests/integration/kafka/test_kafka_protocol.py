"""The listener at the protocol level (issue #30): unsupported versions answered Kafka's
way, malformed frames never take it down (fuzzed), NOT_LEADER_OR_FOLLOWER on a follower, and
one idempotent batch sent twice -- to the leader, then to the next leader after a kill -9 --
appended once."""

from __future__ import annotations

import datetime
import random
import struct
from functools import partial
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from integration.cluster import PeerCluster, module_cluster, wait_for
from raftlog.kafka.offsets import offset_of
from raftlog.kafka.produce import new_producer_id
from raftlog.kafka.settings import split_kafka_url

from .helpers import native, start_kafka_cluster
from .raw import RawKafka, idempotent_batch

pytestmark = pytest.mark.timeout(180)
ZERO = datetime.timedelta(0)


# a publish quota per source address (plaintext [quotas]): Kafka produce is throttled
cluster = module_cluster(
    partial(start_kafka_cluster, extra=("[quotas]", "records_per_s = 200")), "kafka-raw"
)


def _raw(cluster: PeerCluster, peer_id: str) -> RawKafka:
    return RawKafka(*split_kafka_url(str(cluster.peers[peer_id].kafka_url)))


def _produce_full(k: RawKafka, topic: str, batch: bytes) -> Any:
    mod = k.module(0, 9)
    return k.call(0, 9, "ProduceRequest", transactional_id=None, acks=-1,
                  timeout=datetime.timedelta(seconds=20), topic_data=(mod.TopicProduceData(
                      name=topic, partition_data=(mod.PartitionProduceData(
                          index=0, records=batch),)),))


def _produce(k: RawKafka, topic: str, batch: bytes) -> tuple[ErrorCode, int]:
    mod = k.module(0, 9)
    resp = k.call(0, 9, "ProduceRequest", transactional_id=None, acks=-1,
                  timeout=datetime.timedelta(seconds=20), topic_data=(mod.TopicProduceData(
                      name=topic, partition_data=(mod.PartitionProduceData(
                          index=0, records=batch),)),))
    part = resp.responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def _api_versions_ok(k: RawKafka) -> None:
    resp = k.call(18, 3, "ApiVersionsRequest", client_software_name="t",
                  client_software_version="1")
    assert resp.error_code == ErrorCode.none
    assert {a.api_key for a in resp.api_keys} >= {0, 1, 2, 3, 18}


def test_unsupported_versions_are_answered(cluster: PeerCluster) -> None:
    with _raw(cluster, "1") as k:
        # ApiVersions v9: the v0 error answer with the table, so a client can retry
        k.send_frame(struct.pack(">hhih", 18, 9, 77, 0))
        frame = k.read_frame()
        correlation, error = struct.unpack_from(">ih", frame)
        assert (correlation, error) == (77, ErrorCode.unsupported_version.value)
        assert len(frame) > 6 + 4  # the table follows
        # an API we do not speak (DescribeAcls): correlation id and UNSUPPORTED_VERSION
        k.send_frame(struct.pack(">hhih", 29, 1, 78, 0))
        assert struct.unpack(">ih", k.read_frame()) == (78, ErrorCode.unsupported_version.value)
        _api_versions_ok(k)  # the same connection still serves


def test_malformed_frames_never_take_the_listener_down(cluster: PeerCluster) -> None:
    rng = random.Random(30)
    valid = struct.pack(">hhih", 3, 12, 5, 1) + b"x" + b"\x00" + b"\x01\x00\x00\x00"
    for n in range(300):
        kind = n % 4
        if kind == 0:
            frame = rng.randbytes(rng.randrange(0, 64))
        elif kind == 1:  # a real header, a body of noise, for every API we speak
            key = rng.choice([0, 1, 2, 3, 18, 19, 20, 22, 32])
            frame = struct.pack(">hhih", key, rng.randrange(0, 13), n, 1) + b"c" + \
                rng.randbytes(rng.randrange(0, 200))
        elif kind == 2:  # a valid-looking frame with bytes flipped
            raw = bytearray(valid)
            for _ in range(3):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
            frame = bytes(raw)
        else:  # a size prefix that lies
            frame = b""
        with _raw(cluster, "1") as k:
            try:
                if kind == 3:
                    k.sock.sendall(struct.pack(">i", rng.choice([-5, 0, 2**31 - 1])) + b"abc")
                else:
                    k.send_frame(frame)
                k.sock.settimeout(2)
                k.read_frame()  # an answer, or the connection closed: both fine
            except (ConnectionError, TimeoutError, OSError, struct.error):
                pass
    with _raw(cluster, "1") as k:
        _api_versions_ok(k)
    with native(cluster) as topics:  # and the peer itself is fine
        topics.create_topic("after-fuzz")


def test_follower_answers_not_leader(cluster: PeerCluster) -> None:
    leader = cluster.wait_stable_leader()
    follower = next(p for p in cluster.peers if p != leader)
    with native(cluster) as topics:
        topics.create_topic("lead")
    batch = idempotent_batch("lead", [b"x"], new_producer_id(), 0)
    with _raw(cluster, follower) as k:
        assert _produce(k, "lead", batch)[0] == ErrorCode.not_leader_or_follower
    with native(cluster) as topics:
        assert topics.read("lead").records == ()


def test_retried_batch_is_appended_once_across_a_leader_kill(cluster: PeerCluster) -> None:
    with native(cluster) as topics:
        topics.create_topic("dedup")
    pid = new_producer_id()
    batch = idempotent_batch("dedup", [b"a", b"b", b"c"], pid, 0)
    leader = cluster.wait_stable_leader()
    with _raw(cluster, leader) as k:
        # the listener's view may not show its peer leading yet (a fresh cluster): it says
        # NOT_LEADER_OR_FOLLOWER until then, and nothing is appended
        error, first = wait_for(
            "the leader's listener to lead",
            lambda: (got := _produce(k, "dedup", batch))[0] != ErrorCode.not_leader_or_follower
            and got)
        assert error == ErrorCode.none
        assert _produce(k, "dedup", batch) == (ErrorCode.none, first)  # a plain retry
    cluster.kill(leader)
    new_leader = cluster.wait_leader(exclude=leader)
    with _raw(cluster, new_leader) as k:
        # its listener says NOT_LEADER_OR_FOLLOWER until its view shows it leads (a client
        # retries the same way)
        wait_for("the new leader's listener to lead",
                 lambda: _produce(k, "dedup", batch)[0] != ErrorCode.not_leader_or_follower)
        assert _produce(k, "dedup", batch) == (ErrorCode.none, first)  # retry, new leader
        nxt = idempotent_batch("dedup", [b"d"], pid, 3)
        error, second = _produce(k, "dedup", nxt)
        assert error == ErrorCode.none and second > first
    with native(cluster) as topics:
        records = topics.read("dedup").records
    assert [r.record.value for r in records] == [b"a", b"b", b"c", b"d"]
    assert offset_of(records[0].id) == first


def test_publish_quota_throttles_kafka_produce(cluster: PeerCluster) -> None:
    with native(cluster) as topics:
        topics.create_topic("quota")
    leader = cluster.wait_stable_leader()
    pid = new_producer_id()
    throttles = []
    with _raw(cluster, leader) as k:
        for seq in range(0, 600, 150):  # 600 records at 200/s: the later batches wait
            resp = _produce_full(k, "quota", idempotent_batch(
                "quota", [b"q"] * 150, pid, seq))
            assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
            throttles.append(resp.throttle_time)
    assert throttles[0] == ZERO  # within the burst
    assert max(throttles) > ZERO  # held, not refused: every record is there
    with native(cluster) as topics:
        assert len(topics.read("quota", limit=1000).records) == 600
