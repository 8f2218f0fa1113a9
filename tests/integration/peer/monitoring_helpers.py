"""Helpers of the monitoring tests: GET a peer's listener, parse its /metrics, publish
topic records at a steady pace (so the page has a publish rate to show)."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from integration.cluster import PeerCluster
from raftlog.client import RaftClient
from raftlog.topics.client import TopicClient
from raftlog.topics.records import Record

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
"""``(sample name, sorted labels) -> value``."""


def http_get(url: str, token: str | None = None) -> tuple[int, str]:
    """Status and body of a GET (an HTTP error status is an answer, not an exception),
    with ``token`` as a bearer token when given."""
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def metric_samples(base: str) -> Samples:
    """Every sample of ``base``/metrics."""
    status, text = http_get(base + "/metrics")
    assert status == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def publish_batches(cluster: PeerCluster, topic: str, batches: int, per_batch: int) -> None:
    """Create ``topic`` and publish ``batches`` batches of ``per_batch`` records, 50 ms apart."""
    async with (
        RaftClient(cluster.urls, cluster.ident, timeout=15.0) as raft,
        TopicClient(raft) as topics,
    ):
        await topics.create_topic(topic)
        for n in range(batches):
            batch = [Record(topic, b"v%d-%d" % (n, i)) for i in range(per_batch)]
            await topics.publish_batch(batch)
            await asyncio.sleep(0.05)
