"""A three-peer cluster with Kafka listeners, and small helpers for the Kafka tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from integration.cluster import PeerCluster, wait_for
from raftlog.topics.sync_client import SyncTopicClient

KCAT = shutil.which("kcat")
needs_kcat = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (make kcat)")


def start_kafka_cluster(directory: Path, *, auto_create: bool = False,
                        extra: tuple[str, ...] = ()) -> PeerCluster:
    """Three peers, each with a ``kafka_url``; returns once a leader is stable. ``extra``:
    more lines of the cluster file (a ``[quotas]`` table, say)."""
    extra = ("[kafka]", f"auto_create_topics = {'true' if auto_create else 'false'}", *extra)
    cluster = PeerCluster(directory, kafka=True, extra_toml=extra)
    cluster.start()
    try:
        cluster.wait_stable_leader()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def bootstrap(cluster: PeerCluster, *peer_ids: str) -> str:
    """``host:port,...`` of the given peers' listeners (all of them by default)."""
    ids = peer_ids or tuple(cluster.peers)
    return ",".join(str(cluster.peers[i].kafka_url).removeprefix("tcp://") for i in ids)


def native(cluster: PeerCluster) -> SyncTopicClient:
    """A native topic client of the cluster."""
    return SyncTopicClient(cluster.urls, cluster.ident, timeout=20)


def kcat(*args: str, stdin: bytes | None = None, timeout: float = 60) -> bytes:
    """Run kcat; its standard output (the test fails with its stderr on an error)."""
    assert KCAT is not None
    done = subprocess.run([KCAT, *args], input=stdin, capture_output=True, timeout=timeout,
                          check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout


def consume_all(conf: dict[str, Any], topic: str, count: int, timeout: float = 60) -> list[Any]:
    """``count`` messages of ``topic`` from the beginning with a confluent-kafka consumer."""
    consumer = Consumer({"group.id": "unused", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", **conf})
    try:
        consumer.assign([TopicPartition(topic, 0, -2)])  # OFFSET_BEGINNING
        got: list[Any] = []
        errors: list[Any] = []

        def more() -> bool:
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                (got if msg.error() is None else errors).append(msg)
            return len(got) >= count

        wait_for(f"{count} messages of {topic} (errors: {errors[:3]})", more, timeout=timeout)
        return got
    finally:
        consumer.close()
