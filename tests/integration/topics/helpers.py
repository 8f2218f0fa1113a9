"""Shared pieces of the topic integration tests: clusters, clients, per-peer reads."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from integration.cluster import PeerCluster
from raftlog.client import RaftClient
from raftlog.errors import TopicError
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


async def wait_applied(
    topics: TopicClient, topic: str, url: str, index: int, timeout: float = 20.0
) -> None:
    """Until the peer at ``url`` has applied ``index`` (its reads of ``topic`` cover it).

    A peer restarted behind the leader knows no topic created after its last applied entry
    until it has caught up (a snapshot or the log), so ``UnknownTopic`` is asked again
    meanwhile; a topic that is really missing still fails, with that answer, once
    ``timeout`` passes (CI, 2026-11-26: a follower killed before it applied the topic's
    creation, read right after its restart)."""
    unknown: TopicError | None = None
    try:
        async with asyncio.timeout(timeout):  # also bounds a read that never answers
            while True:
                try:
                    if (await topics.read(topic, url=url, limit=1)).applied >= index:
                        return
                    unknown = None
                except TopicError as exc:
                    if exc.name != "UnknownTopic":
                        raise
                    unknown = exc
                await asyncio.sleep(0.05)
    except TimeoutError:
        if unknown is not None:
            raise unknown from None
        raise
