"""Our RaftClient, SyncRaftClient and Subscriber against a three-peer reference cluster."""

from __future__ import annotations

import asyncio

from reference import ReferenceCluster

from raftlog.client import IndexedEntry, RaftClient, Subscriber, SyncRaftClient
from raftlog.client.entries import EntryStream
from raftlog.entry import EntryType


def _urls(cluster: ReferenceCluster) -> list[str]:
    return list(cluster.urls.values())


def test_discovery_updates_retry_and_log_info(reference_cluster: ReferenceCluster) -> None:
    leader = reference_cluster.wait_for_leader()
    with SyncRaftClient(_urls(reference_cluster)[-1:], reference_cluster.ident, timeout=30) as c:
        info = c.request_config()
        assert info.leader_id == leader
        assert [p.url for p in info.peers] == _urls(reference_cluster)
        indexes = [c.request_update(b"ours %d" % n) for n in range(30)]
        assert indexes == sorted(indexes) and len(set(indexes)) == 30
        rid = c.new_request_id()
        first = c.request_update(b"once", rid)
        assert c.request_update(b"once", rid) == first  # the reference's id cache answers
        log = c.request_log_info()
        assert log.is_leader and log.commit_index >= first and log.last_applied >= first
        entries = [i for i in c.request_entries(0) if isinstance(i, IndexedEntry)]
        states = [e for e in entries if e.entry.entry_type == EntryType.STATE]
        assert [e.entry.data for e in states] == [b"ours %d" % n for n in range(30)] + [b"once"]
        assert [e.index for e in states][-1] == first
        assert c.request_broadcast_url() == reference_cluster.pub_urls[leader]


def test_subscriber_catches_up_then_follows_reference_broadcasts(
    reference_cluster: ReferenceCluster,
) -> None:
    urls, ident = _urls(reference_cluster), reference_cluster.ident

    async def scenario() -> list[bytes]:
        async with RaftClient(urls, ident, timeout=30) as client:
            for n in range(5):
                await client.request_update(b"history %d" % n)
            got: list[bytes] = []
            async with Subscriber(client, from_index=0) as sub:
                async for item in sub:
                    assert isinstance(item, IndexedEntry)
                    got.append(item.entry.data)
                    if len(got) == 5:
                        for n in range(5):  # now live, through the reference's PUB socket
                            await client.request_update(b"live %d" % n)
                    if len(got) == 10:
                        assert sub.caught_up and sub.last_index == item.index
                        break
            return got

    got = asyncio.run(asyncio.wait_for(scenario(), 90))
    assert got == [b"history %d" % n for n in range(5)] + [b"live %d" % n for n in range(5)]


def test_any_peer_streams_fall_back_to_the_reference_leader(
    reference_cluster: ReferenceCluster,
) -> None:
    """raftlog's any_peer flag (frame 7) is ignored by a reference follower: it answers "not
    leader" (and keeps running: frame 6 is a valid uint), and the stream continues at the
    leader with every entry."""
    leader = reference_cluster.wait_for_leader()
    follower = next(url for pid, url in reference_cluster.urls.items() if pid != leader)
    urls, ident = _urls(reference_cluster), reference_cluster.ident

    async def scenario() -> list[bytes]:
        async with RaftClient(urls, ident, timeout=30) as client:
            for n in range(5):
                await client.request_update(b"any %d" % n)
            got = []
            async for item in client.request_entries(0, from_peer=follower):
                if isinstance(item, IndexedEntry) and item.entry.entry_type == EntryType.STATE:
                    got.append(item.entry.data)
            info = await client.request_config()
            assert len(info.peers) == 3 and reference_cluster.wait_for_leader() == leader
            return got

    got = asyncio.run(asyncio.wait_for(scenario(), 90))
    assert got[-5:] == [b"any %d" % n for n in range(5)]
    assert sorted(reference_cluster.running_ids) == sorted(reference_cluster.urls)


def test_consistency_frames_are_invisible_to_a_reference_cluster(
    reference_cluster: ReferenceCluster,
) -> None:
    """raftlog's read consistency frames 8-9 (issue #29) are ignored by reference peers: a
    read_your_writes stream from a reference follower is refused there ("not leader", the
    follower keeps running) and continues at the leader; a linearizable stream to the
    reference leader is served as an ordinary one (the reference confirms nothing: the level
    needs raftlog peers, docs/client.md)."""
    leader = reference_cluster.wait_for_leader()
    follower = next(url for pid, url in reference_cluster.urls.items() if pid != leader)
    urls, ident = _urls(reference_cluster), reference_cluster.ident

    async def scenario() -> tuple[list[bytes], list[bytes]]:
        async with RaftClient(urls, ident, timeout=30) as client:
            for n in range(3):
                await client.request_update(b"level %d" % n)

            async def states(stream: EntryStream) -> list[bytes]:
                return [
                    item.entry.data
                    async for item in stream
                    if isinstance(item, IndexedEntry) and item.entry.entry_type == EntryType.STATE
                ]

            mine = await states(
                client.request_entries(0, from_peer=follower, consistency="read_your_writes")
            )
            linear = await states(client.request_entries(0, consistency="linearizable"))
            return mine, linear

    mine, linear = asyncio.run(asyncio.wait_for(scenario(), 90))
    assert mine[-3:] == linear[-3:] == [b"level %d" % n for n in range(3)]
    assert sorted(reference_cluster.running_ids) == sorted(reference_cluster.urls)
