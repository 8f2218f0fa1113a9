"""A secure cluster's Kafka listener (issue #30): TLS with the [http] certificate, SASL/PLAIN
whose password is a REST token, and then the same role, topic ACLs and consumer-group rights
as that token's REST requests; a bad token is refused."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from integration.cluster import PeerCluster
from integration.secure_setup import ClientSpec, SecureSetup
from raftlog.security import http_tls
from raftlog.topics.sync_client import SyncTopicClient

from .helpers import consume_all

pytestmark = pytest.mark.timeout(180)
TOKENS = {"admin": "tok-admin-0123456789", "writer": "tok-writer-0123456789",
          "reader": "tok-reader-0123456789", "member": "tok-member-0123456789"}


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PeerCluster, Path]]:
    directory = tmp_path_factory.mktemp("kafka-sasl")
    setup = SecureSetup(directory, clients=[
        ClientSpec("admin", "admin", token=TOKENS["admin"]),
        ClientSpec("writer", "writer", publish=["orders*"], read=["orders*"],
                   token=TOKENS["writer"]),
        ClientSpec("reader", "reader", read=["orders*"], token=TOKENS["reader"]),
        ClientSpec("member", "reader", read=["orders*"], consume=["mine*"],
                   token=TOKENS["member"]),
    ])
    cert, key = setup.keys_dir / "http" / "peer.crt", setup.keys_dir / "http" / "peer.key"
    http_tls.ensure_server_cert(setup.keys_dir, cert, key, ["127.0.0.1"])
    ca, _ = http_tls.ensure_ca(setup.keys_dir)
    cluster = PeerCluster(directory, kafka=True, security=setup,
                          extra_toml=[f'[http]\ntls_cert = "{cert}"\ntls_key = "{key}"'])
    for peer in cluster.peers.values():
        peer.kafka_url = str(peer.kafka_url).replace("tcp://", "sasl_ssl://")
    cluster.write_config()
    cluster.start()
    try:
        cluster.wait_stable_leader()
        with SyncTopicClient(cluster.urls, cluster.ident, curve=setup.admin, timeout=20) as t:
            t.create_topic("orders-1")
            t.create_topic("secret")
            t.create_group("theirs", mode="stream", pattern="*")
        yield cluster, ca
    finally:
        cluster.stop()


def _conf(cluster: PeerCluster, ca: Path, who: str, password: str | None = None) -> dict[
        str, Any]:
    servers = ",".join(str(p.kafka_url).removeprefix("sasl_ssl://")
                       for p in cluster.peers.values())
    return {"bootstrap.servers": servers, "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "PLAIN", "sasl.username": who,
            "sasl.password": password or TOKENS[who], "ssl.ca.location": str(ca)}


def _produce(conf: dict[str, Any], topic: str) -> KafkaError | None:
    errors: list[KafkaError | None] = []
    producer = Producer({**conf, "message.timeout.ms": 10_000})
    producer.produce(topic, b"hello", on_delivery=lambda err, _m: errors.append(err))
    producer.flush(30)
    return errors[0] if errors else KafkaError(KafkaError._MSG_TIMED_OUT)


def test_tokens_roles_and_topic_acls_apply(secure: tuple[PeerCluster, Path]) -> None:
    cluster, ca = secure
    assert _produce(_conf(cluster, ca, "writer"), "orders-1") is None
    denied = _produce(_conf(cluster, ca, "writer"), "secret")  # not in its publish ACL
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    denied = _produce(_conf(cluster, ca, "reader"), "orders-1")  # role reader: no publish
    assert denied is not None and denied.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                                    KafkaError.CLUSTER_AUTHORIZATION_FAILED)
    got = consume_all(_conf(cluster, ca, "reader"), "orders-1", 1)
    assert got[0].value() == b"hello"
    # Metadata shows a client only the topics it may read
    listed = AdminClient(_conf(cluster, ca, "reader")).list_topics(timeout=20).topics
    assert "orders-1" in listed and "secret" not in listed


def test_a_wrong_token_is_refused(secure: tuple[PeerCluster, Path]) -> None:
    cluster, ca = secure
    curve = cluster.security.admin if cluster.security else None
    with SyncTopicClient(cluster.urls, cluster.ident, timeout=20, curve=curve) as t:
        before = len(t.read("orders-1").records)  # whatever the other test appended
    failed = _produce(_conf(cluster, ca, "writer", password="not-a-token"), "orders-1")
    assert failed is not None
    assert failed.code() in (KafkaError._AUTHENTICATION, KafkaError._MSG_TIMED_OUT,
                             KafkaError.SASL_AUTHENTICATION_FAILED)
    with SyncTopicClient(cluster.urls, cluster.ident, timeout=20, curve=curve) as t:
        assert len(t.read("orders-1").records) == before  # nothing was appended


def _committed(conf: dict[str, Any], group: str, offset: int) -> KafkaError | None:
    """Commit ``offset`` on orders-1 for ``group`` (no membership: generation -1) and read
    it back; the error of either, or None."""
    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    try:
        part = TopicPartition("orders-1", 0, offset)
        consumer.commit(offsets=[part], asynchronous=False)
        back = consumer.committed([TopicPartition("orders-1", 0)], timeout=20)[0]
        assert back.error is None and back.offset == offset
        return None
    except KafkaException as exc:
        return exc.args[0]
    finally:
        consumer.close()


def _join_error(conf: dict[str, Any], group: str) -> KafkaError | None:
    """Subscribe to orders-1 in ``group``: the first error the consumer reports, or None
    once it was assigned the partition (JoinGroup and SyncGroup went through)."""
    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False,
                         "session.timeout.ms": 6000})
    try:
        consumer.subscribe(["orders-1"])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                return msg.error()
            if consumer.assignment():
                return None
        raise AssertionError(f"neither assigned nor refused in group {group!r}")
    finally:
        consumer.close()


def test_kafka_groups_need_the_tokens_consume_right(secure: tuple[PeerCluster, Path]) -> None:
    """A token may commit, fetch and join only in the groups its ``consume`` patterns name,
    as over REST and the native protocol: another principal's group is not reachable through
    the Kafka door (its position is unchanged)."""
    cluster, ca = secure
    conf = _conf(cluster, ca, "member")
    assert _committed(conf, "mine-1", 1) is None
    denied = _committed(conf, "theirs", 1)
    assert denied is not None and denied.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    refused = _join_error(conf, "theirs")
    assert refused is not None and refused.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert _join_error(conf, "mine-2") is None
    curve = cluster.security.admin if cluster.security else None
    with SyncTopicClient(cluster.urls, cluster.ident, timeout=20, curve=curve) as t:
        assert t.group_positions("theirs") == {}  # never moved
        assert set(t.group_positions("mine-1")) == {"orders-1"}
