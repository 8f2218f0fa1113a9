"""RaftClient against a real 3-peer cluster: discovery, updates, idempotency, errors."""

from __future__ import annotations

import asyncio
import itertools
import os
import time
import uuid

import pytest

from integration.cluster import PeerCluster
from raftlog.client import RaftClient
from raftlog.errors import ClusterUnavailableError, ConfigUpdateError, RequestExpiredError
from raftlog.ids import machine_id, make_request_id

from .conftest import client_for, read_log

pytestmark = pytest.mark.timeout(120)


async def test_discovery_from_one_follower_seed_finds_leader_and_all_peers(
    shared_cluster: PeerCluster,
) -> None:
    leader_id = shared_cluster.wait_stable_leader()
    follower = next(p for p in shared_cluster.peers.values() if p.id != leader_id)
    async with RaftClient([follower.url], shared_cluster.ident) as client:
        info = await client.request_config()
        assert info.is_leader
        assert info.leader_id in shared_cluster.peers
        assert {(p.id, p.url) for p in info.peers} == {
            (p.id, p.url) for p in shared_cluster.peers.values()
        }
        assert info.leader_url == shared_cluster.peers[leader_id].url
        assert client.leader is not None and client.leader.id == info.leader_id
        assert sorted(client.peer_urls) == sorted(shared_cluster.urls)


async def test_log_info_from_leader_and_from_any_peer(shared_cluster: PeerCluster) -> None:
    async with client_for(shared_cluster) as client:
        index = await client.request_update(b"log-info probe")
        info = await client.request_log_info()
        assert info.is_leader and info.last_applied >= index and info.commit_index >= index
    leader_id = shared_cluster.wait_stable_leader()
    follower = next(p for p in shared_cluster.peers.values() if p.id != leader_id)
    async with RaftClient([follower.url], shared_cluster.ident) as client:
        any_info = await client.request_log_info(any_peer=True)  # the follower answers itself
        assert not any_info.is_leader and any_info.last_index >= index


async def test_broadcast_url_is_the_leaders_pub_url(shared_cluster: PeerCluster) -> None:
    async with client_for(shared_cluster) as client:
        url = await client.request_broadcast_url()
        asked = client.leader  # the peer the request went to, as the leader
        assert asked is not None
        assert url == shared_cluster.peers[asked.id].pub_url


async def test_sequential_updates_get_increasing_indexes(shared_cluster: PeerCluster) -> None:
    tag = uuid.uuid4().hex.encode()
    async with client_for(shared_cluster) as client:
        indexes = [await client.request_update(b"%s seq %d" % (tag, n)) for n in range(100)]
        assert all(a < b for a, b in itertools.pairwise(indexes))
        entries = {e.index: e.entry.data for e in await read_log(client, indexes[0] - 1)}
        assert [entries[i] for i in indexes] == [b"%s seq %d" % (tag, n) for n in range(100)]


async def test_concurrent_updates_get_distinct_indexes(shared_cluster: PeerCluster) -> None:
    tag = uuid.uuid4().hex.encode()
    payloads = [b"%s par %d" % (tag, n) for n in range(200)]
    async with client_for(shared_cluster) as client:
        indexes = await asyncio.gather(*(client.request_update(p) for p in payloads))
        assert len(set(indexes)) == 200
        log = {e.index: e.entry.data for e in await read_log(client, min(indexes) - 1)}
        assert [log[i] for i in indexes] == payloads


async def test_retry_with_the_same_request_id_is_applied_once(shared_cluster: PeerCluster) -> None:
    data = b"idempotent " + uuid.uuid4().hex.encode()
    async with client_for(shared_cluster) as client:
        rid = client.new_request_id()
        first = await client.request_update(data, rid)
        again = await client.request_update(data, rid)
        concurrent = await asyncio.gather(*(client.request_update(data, rid) for _ in range(5)))
        assert again == first and set(concurrent) == {first}
        log = await read_log(client)
        assert [e.index for e in log if e.entry.request_id == rid] == [first]
        assert [e.index for e in log if e.entry.data == data] == [first]


@pytest.mark.parametrize("offset_s", [-9 * 3600, 3600], ids=["too-old", "from-the-future"])
async def test_request_id_outside_the_window_is_expired(
    shared_cluster: PeerCluster, offset_s: int
) -> None:
    rid = make_request_id(int(time.time()) + offset_s, machine_id(), os.getpid(), 12345)
    async with client_for(shared_cluster) as client:
        with pytest.raises(RequestExpiredError):
            await client.request_update(b"stale", rid)
        assert b"stale" not in [e.entry.data for e in await read_log(client)]


async def test_empty_update_is_refused_locally(shared_cluster: PeerCluster) -> None:
    async with client_for(shared_cluster) as client:
        with pytest.raises(ValueError, match="at least one byte"):
            await client.request_update(b"")
        with pytest.raises(ValueError, match="12 bytes"):
            await client.request_update(b"x", b"short")


async def test_invalid_config_update_is_refused_with_status_2(
    shared_cluster: PeerCluster,
) -> None:
    async with client_for(shared_cluster) as client:
        current = (await client.request_config()).peers
        # Same id, another URL: "new peers must be consistent with current configuration".
        moved = [(p.id, p.url) for p in current[:-1]] + [(current[-1].id, "tcp://127.0.0.1:1")]
        with pytest.raises(ConfigUpdateError) as refused:
            await client.config_update(moved)
        assert refused.value.status == 2 and refused.value.message
        assert (await client.request_config()).peers == current


async def test_wrong_ident_times_out_with_a_report_of_what_was_tried(
    shared_cluster: PeerCluster,
) -> None:
    async with RaftClient(shared_cluster.urls, "not-this-cluster") as client:
        started = time.monotonic()
        with pytest.raises(ClusterUnavailableError) as failed:
            await client.request_update(b"lost", timeout=1.5)
        assert 1.4 < time.monotonic() - started < 5.0
        message = str(failed.value)
        assert "no response" in message
        assert any(url in message for url in shared_cluster.urls)


async def test_closed_client_refuses_calls(shared_cluster: PeerCluster) -> None:
    client = client_for(shared_cluster)
    await client.request_config()
    await client.aclose()
    await client.aclose()  # idempotent
    with pytest.raises(Exception, match="closed"):
        await client.request_update(b"after close")
