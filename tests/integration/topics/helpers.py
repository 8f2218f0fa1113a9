"""Shared pieces of the topic integration tests: clusters, clients, per-peer reads."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from integration.cluster import PeerCluster
from raftlog.client import RaftClient
from raftlog.topics.client import TopicClient
from raftlog.topics.wire import ReadResult

Row = tuple[int, int, int, str, bytes | None, bytes]
"""(index, position, append time, topic, key, value): what must match across peers."""


def start_cluster(
    directory: Path, ids: tuple[str, ...] = ("1", "2", "3"), raft: dict[str, Any] | None = None
) -> PeerCluster:
    cluster = PeerCluster(directory, ids, ident="raftlog-topics-test", raft=raft)
    try:
        cluster.start()
        cluster.wait_stable_leader(20)
    except BaseException:
        cluster.stop()
        raise
    return cluster


@asynccontextmanager
async def topic_client(cluster: PeerCluster) -> AsyncIterator[TopicClient]:
    async with (
        RaftClient(cluster.urls, cluster.ident, timeout=15.0) as raft,
        TopicClient(raft) as topics,
    ):
        yield topics


def rows(result: ReadResult) -> list[Row]:
    return [
        (r.id.index, r.id.position, r.append_time_ms, r.record.topic, r.record.key, r.record.value)
        for r in result.records
    ]


async def read_all(topics: TopicClient, topic: str, url: str, **kw: Any) -> list[Row]:
    """Every record of ``topic`` at peer ``url`` (paging through ``more``)."""
    out: list[Row] = []
    result = await topics.read(topic, url=url, **kw)
    out += rows(result)
    while result.more:
        last = result.records[-1].id
        result = await topics.read(
            topic, url=url, from_index=last.index, from_position=last.position, inclusive=False
        )
        out += rows(result)
    return out


async def wait_applied(topics: TopicClient, topic: str, url: str, index: int) -> None:
    """Until the peer at ``url`` has applied ``index`` (its reads cover it)."""
    async with asyncio.timeout(20):
        while (await topics.read(topic, url=url, limit=1)).applied < index:
            await asyncio.sleep(0.05)
