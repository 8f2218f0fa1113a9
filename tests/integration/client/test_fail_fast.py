"""RaftClient fails fast and says why (issue #13 item 4), and its transport carries the
layers above it (issue #19 item 3). Real sockets and real peers on loopback; the timing
bounds are generous (a loaded 2-core CI host), yet far below the calls' own deadlines."""

from __future__ import annotations

import time

import pytest

from integration.cluster import PeerCluster, free_ports
from raftlog.client import RaftClient
from raftlog.client.report import ALL_REFUSED, NO_ANSWER
from raftlog.errors import ClusterUnavailableError, EntryTooLargeError
from raftlog.rpc.messages import TYPE_REQUEST_LOG_INFO
from raftlog.topics.client import TopicClient

pytestmark = pytest.mark.timeout(120)


async def test_every_peer_refusing_fails_within_the_refused_timeout() -> None:
    urls = [f"tcp://127.0.0.1:{port}" for port in free_ports(3)]
    async with RaftClient(urls, "x", timeout=30.0) as client:
        for call in (client.request_config(), client.request_update(b"data")):
            started = time.monotonic()
            with pytest.raises(ClusterUnavailableError) as failed:
                await call
            assert time.monotonic() - started < 5.0
            assert ALL_REFUSED in str(failed.value)


async def test_refused_timeout_is_configurable() -> None:
    url = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    async with RaftClient([url], "x", timeout=30.0, refused_timeout=3.0) as client:
        started = time.monotonic()
        with pytest.raises(ClusterUnavailableError):
            await client.request_config()
        assert 2.9 < time.monotonic() - started < 10.0


async def test_a_cluster_that_went_down_is_reported_fast(cluster: PeerCluster) -> None:
    async with RaftClient(cluster.urls, cluster.ident, timeout=30.0) as client:
        await client.request_update(b"before")
        cluster.stop()
        started = time.monotonic()
        with pytest.raises(ClusterUnavailableError, match="refused the connection"):
            await client.request_update(b"after")
        assert time.monotonic() - started < 8.0


async def test_wrong_ident_names_the_likely_cause(shared_cluster: PeerCluster) -> None:
    async with RaftClient(shared_cluster.urls, "not-this-cluster", timeout=1.5) as client:
        with pytest.raises(ClusterUnavailableError) as failed:
            await client.request_config()
        assert str(failed.value).startswith(NO_ANSWER)


async def test_oversized_entries_are_refused_before_sending(shared_cluster: PeerCluster) -> None:
    async with RaftClient(shared_cluster.urls, shared_cluster.ident) as client:
        info = await client.request_log_info()
        with pytest.raises(EntryTooLargeError) as too_big:
            await client.request_update(b"x" * (11 * 1024 * 1024))
        assert too_big.value.limit == 10 * 1024 * 1024
        small = RaftClient(shared_cluster.urls, shared_cluster.ident, max_entry_size=100)
        async with small, TopicClient(small) as topics:
            with pytest.raises(EntryTooLargeError):
                await topics.publish("any", b"y" * 200)
        assert (await client.request_log_info()).last_index == info.last_index


async def test_peer_request_asks_that_one_peer(shared_cluster: PeerCluster) -> None:
    async with RaftClient(shared_cluster.urls, shared_cluster.ident) as client:
        for peer in shared_cluster.peers.values():
            own = await client.request_log_info(peer_url=peer.url)
            assert own.is_leader == (peer.id == shared_cluster.leader())
            frames = await client.peer_request(peer.url, TYPE_REQUEST_LOG_INFO, [])
            assert frames[0] == (b"\x01" if own.is_leader else b"")  # raw, after the id


async def test_leader_request_carries_topic_publishes(shared_cluster: PeerCluster) -> None:
    async with (
        RaftClient(shared_cluster.urls, shared_cluster.ident) as client,
        TopicClient(client) as topics,
    ):
        await topics.create_topic("transport")
        first = await topics.publish("transport", b"one")
        second = await topics.publish("transport", b"two")
        assert second.index > first.index
        read = await topics.read("transport", from_index=first.index)
        assert [r.record.value for r in read.records] == [b"one", b"two"]
        follower = next(
            p.url for p in shared_cluster.peers.values() if p.id != shared_cluster.leader()
        )
        assert "transport" in await topics.list_topics(url=follower)


async def test_one_refusing_peer_is_waited_for_unless_fail_fast() -> None:
    """A peer may be restarting: per-peer requests wait for it until their timeout by
    default; ``fail_fast`` gives up once it has refused for ``refused_timeout``."""
    url = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    async with RaftClient([url], "x", refused_timeout=0.5) as client:
        started = time.monotonic()
        with pytest.raises(ClusterUnavailableError):
            await client.request_log_info(peer_url=url, timeout=2.5)
        assert time.monotonic() - started >= 2.4
        started = time.monotonic()
        with pytest.raises(ClusterUnavailableError, match="the peer refused the connection"):
            await client.request_log_info(peer_url=url, fail_fast=True, timeout=30)
        assert time.monotonic() - started < 5.0


async def test_a_restarting_peer_is_answered_once_it_is_back(cluster: PeerCluster) -> None:
    async with RaftClient(cluster.urls, cluster.ident, timeout=30.0) as client:
        await client.request_config()
        leader = cluster.wait_stable_leader()
        follower = next(p for p in cluster.peers if p != leader)
        cluster.kill(follower)
        url = cluster.peers[follower].url
        with pytest.raises(ClusterUnavailableError):
            await client.request_log_info(peer_url=url, fail_fast=True)
        cluster.start(follower)
        info = await client.request_log_info(peer_url=url)  # waits while it starts up
        assert not info.is_leader
