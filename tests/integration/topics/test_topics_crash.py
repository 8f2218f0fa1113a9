"""Topics across leader changes and kill -9: idempotent republish, index rebuilt from the log,
and auto-create decided by the leader (issue #7)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from integration.cluster import PeerCluster, wait_for
from raftlog.client import RaftClient
from raftlog.topics.client import TopicClient, publish_data
from raftlog.topics.machine import TOPICS_DIR
from raftlog.topics.records import Record, TopicProperties

from .helpers import Row, read_all, start_cluster, topic_client, wait_applied

pytestmark = pytest.mark.timeout(60)


async def _views(topics: TopicClient, cluster: PeerCluster, topic: str, upto: int) -> list[Row]:
    """The topic as every running peer serves it, once each has applied ``upto``; they must
    all be the same."""
    views = []
    for peer in cluster.peers.values():
        if peer.running:
            await wait_applied(topics, topic, peer.url, upto)
            views.append(await read_all(topics, topic, peer.url))
    assert all(view == views[0] for view in views[1:])
    return views[0]


async def test_republish_after_leader_change_and_index_rebuilt_after_kill9(
    tmp_path: Path,
) -> None:
    cluster = start_cluster(tmp_path)
    try:
        async with (
            topic_client(cluster) as topics,
            RaftClient(cluster.urls, cluster.ident, timeout=15.0) as raft,
        ):
            await topics.create_topic("events")
            await topics.create_topic("temp")
            for n in range(20):
                await topics.publish("events", b"e%d" % n)
            once = publish_data([Record("events", b"once")])
            rid = raft.new_request_id()
            first = await topics.propose(once, request_id=rid)
            temp_rid = raft.new_request_id()
            temp_data = publish_data([Record("temp", b"t")])
            temp_index = await topics.propose(temp_data, request_id=temp_rid)

            old_leader = cluster.wait_stable_leader(20)
            cluster.kill(old_leader)  # SIGKILL: only what was fsynced survives
            new_leader = wait_for(
                "a new leader",
                lambda: (lid := cluster.wait_stable_leader(20)) != old_leader and lid,
            )
            assert new_leader != old_leader
            # same request id at the new leader: the same index, nothing appended again --
            # through TP and through a plain RequestUpdate alike
            assert await topics.propose(once, request_id=rid) == first
            assert await raft.request_update(once, request_id=rid) == first
            # idempotency wins over validation: the topic is gone, the answer is the same
            await topics.delete_topic("temp")
            assert await topics.propose(temp_data, request_id=temp_rid) == temp_index

            for n in range(20, 40):
                last = (await topics.publish("events", b"e%d" % n)).index

            # the killed leader restarts: its index continues from wherever it was
            cluster.start(old_leader)
            rows = await _views(topics, cluster, "events", last)
            values = [r[5] for r in rows]
            assert values.count(b"once") == 1
            assert values == [b"e%d" % n for n in range(20)] + [b"once"] + [
                b"e%d" % n for n in range(20, 40)
            ]

            # a follower loses its whole topic index: rebuilt from its log on restart
            leader = cluster.wait_stable_leader(20)
            follower = next(p for p in cluster.peers if p != leader)
            cluster.kill(follower)
            shutil.rmtree(cluster.peers[follower].data_dir / TOPICS_DIR)
            for n in range(40, 50):
                last = (await topics.publish("events", b"e%d" % n)).index
            cluster.start(follower)
            rebuilt = await _views(topics, cluster, "events", last)
            assert rebuilt == rows + rebuilt[len(rows) :]
            assert [r[5] for r in rebuilt[len(rows) :]] == [b"e%d" % n for n in range(40, 50)]
            url = cluster.peers[follower].url
            assert await topics.describe("events", url=url) == await topics.describe("events")
            assert "temp" not in await topics.list_topics(url=url)
    finally:
        cluster.stop()


async def test_auto_create_when_the_leader_allows_it(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path, ("1",), raft={"topic_auto_create": True})
    try:
        async with topic_client(cluster) as topics:
            rid = await topics.publish("created-on-publish", b"hello")
            info = await topics.describe("created-on-publish")
            assert info.created_index == rid.index
            assert info.first == info.last == rid
            assert info.properties.retention_ms is None
    finally:
        cluster.stop()


COMPACTING = {
    "log_compaction_threshold": 40,
    "request_id_ttl": None,  # ids bounded by count instead, so compaction may proceed
    "request_id_cache_max": 10,
}


async def test_a_follower_restored_from_a_snapshot_keeps_topics_and_serves_the_rest(
    tmp_path: Path,
) -> None:
    cluster = start_cluster(tmp_path, raft=COMPACTING)
    try:
        async with topic_client(cluster) as topics:
            # size retention keeps the newest 10 records (10 bytes each): the log may be
            # compacted past the older ones, never past a retained one (issue #11)
            await topics.create_topic("kept", retention_ms=10**9, max_bytes=100)
            leader = cluster.wait_stable_leader(20)
            follower = next(p for p in cluster.peers if p != leader)
            cluster.kill(follower)
            for n in range(0, 160, 2):  # 80 entries, over the compaction threshold
                batch = [Record("kept", b"r%09d" % (n + k)) for k in range(2)]
                last = (await topics.publish_batch(batch))[-1].index
            compacted = wait_for(
                "the leader to compact",
                lambda: (i := cluster.log_info(leader)) is not None and i.first_index > 20 and i,
            )
            cluster.start(follower)  # behind the leader's snapshot: InstallSnapshot
            url = cluster.peers[follower].url
            await wait_applied(topics, "kept", url, last)
            info = cluster.log_info(follower)
            assert info is not None and info.first_index > 1  # it was restored from a snapshot
            described, at_leader = (
                await topics.describe("kept", url=url),
                await topics.describe("kept"),
            )
            assert described.properties == at_leader.properties == TopicProperties(10**9, 100)
            assert described.created_index == at_leader.created_index < info.first_index
            assert (described.first, described.last) == (at_leader.first, at_leader.last)
            after = (await topics.publish("kept", b"after-0000")).index
            views = {}
            for peer in cluster.peers.values():
                await wait_applied(topics, "kept", peer.url, after)
                views[peer.id] = await read_all(topics, "kept", peer.url)
            rows = views[leader]
            assert all(v == rows for v in views.values())  # every peer: the same records
            assert [r[5] for r in rows] == [b"r%09d" % n for n in range(151, 160)] + [b"after-0000"]
            for peer_id in views:  # every retained record is still in each peer's log
                first = cluster.log_info(peer_id).first_index  # type: ignore[union-attr]
                assert rows[0][0] >= first
            assert compacted.first_index > 1
    finally:
        cluster.stop()
