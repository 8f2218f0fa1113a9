"""Issue #11 end to end: retained records survive log compaction (also after a restart from
the snapshot and on a peer added after the compaction), size retention, per-record TTL, and
a follower across delete + re-create. Every check is made on every peer."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from functools import partial
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from integration.cluster import PEER_BIN, PeerCluster, module_cluster, wait_for
from raftlog.client import Peer, RaftClient, SyncRaftClient
from raftlog.topics import RecordsExpiredError, SyncTopicClient, TopicClient, make_record
from raftlog.topics.wire import TopicInfo

from .helpers import Row, read_all, start_cluster, topic_client, wait_applied

ADMIN = PEER_BIN.with_name("raftlog-admin")
WEEK_MS = 7 * 86_400_000


def admin(cluster: PeerCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ADMIN), "--config", str(cluster.config_path), "--timeout", "20", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# the settings: request ids do not pin the log, so `compact` has work to do
cluster = module_cluster(
    partial(start_cluster, raft={"request_id_ttl": None, "request_id_cache_max": 100}),
    "retention",
)


async def _publish_many(topics: TopicClient, topic: str, count: int) -> list[int]:
    sem = asyncio.Semaphore(32)

    async def one(n: int) -> int:
        async with sem:
            return (await topics.publish(topic, b"%s-%d" % (topic.encode(), n))).index

    return list(await asyncio.gather(*(one(n) for n in range(count))))


async def _plain_updates(client: RaftClient, count: int) -> int:
    sem = asyncio.Semaphore(32)

    async def one(n: int) -> int:
        async with sem:
            return await client.request_update(b"plain %d" % n)

    return max(await asyncio.gather(*(one(n) for n in range(count))))


async def _everywhere(
    cluster: PeerCluster, topics: TopicClient, topic: str, index: int
) -> dict[str, list[Row]]:
    out = {}
    for peer_id, peer in cluster.peers.items():
        if peer.running:
            await wait_applied(topics, topic, peer.url, index)
            out[peer_id] = await read_all(topics, topic, peer.url)
    return out


def _compact_all(cluster: PeerCluster) -> dict[str, int]:
    done = admin(cluster, "compact")
    assert done.returncode == 0, done.stderr
    out = {}
    for line in done.stdout.splitlines():
        url, text = line.split("\t")
        out[url] = int(text.split()[-1]) if text.startswith("compacted to") else 0
    return out


async def test_compaction_keeps_every_retained_record_restart_and_new_peer(
    cluster: PeerCluster, tmp_path: Path
) -> None:
    async with topic_client(cluster) as topics:
        # records that expire before the compaction: the log may drop them
        await topics.create_topic("short", retention_ms=1000)
        short = await _publish_many(topics, "short", 50)
        await _plain_updates(topics.raft_client, 200)
        # the scenario: a seven-day topic, 300 records, 400 plain updates, compact
        made = admin(cluster, "topics", "create", "orders", "--retention-ms", str(WEEK_MS))
        assert made.returncode == 0, made.stderr
        orders = await _publish_many(topics, "orders", 300)
        last = await _plain_updates(topics.raft_client, 400)
        await asyncio.sleep(1.2)  # "short" expires on every peer (the leader's clock tick)
        for peer in cluster.peers.values():
            await wait_applied(topics, "short", peer.url, last)
            async with asyncio.timeout(10):
                while (await topics.describe("short", url=peer.url)).first is not None:
                    await asyncio.sleep(0.1)

        compacted = _compact_all(cluster)
        # compaction passed the expired records but stopped before the first retained one
        assert set(compacted.values()) == {min(orders) - 1}, compacted
        assert min(orders) - 1 > max(short)
        before = await _everywhere(cluster, topics, "orders", last)
        assert {len(rows) for rows in before.values()} == {300}
        assert len({tuple(rows) for rows in before.values()}) == 1
        shown = admin(cluster, "read", "--topic", "orders")  # the CLI, as in the issue
        assert shown.returncode == 0 and len(shown.stdout.splitlines()) == 300, shown.stderr
        expired = admin(cluster, "read", "--topic", "short", "--from", str(min(short)))
        assert expired.returncode == 1 and "RecordsExpired" in expired.stderr
        assert len(expired.stderr.strip().splitlines()) == 1
        below = admin(cluster, "read", "--from", "1")  # plain read below the first index
        assert below.returncode == 1 and "compacted" in below.stderr, below.stderr

        # a follower restarts from the snapshot: its topic index is gone, its log compacted
        follower = next(p for p in cluster.peers if p != cluster.wait_leader())
        cluster.terminate(follower)
        shutil.rmtree(cluster.peers[follower].data_dir / "topics")
        cluster.start(follower)
        after_restart = await _everywhere(cluster, topics, "orders", last)
        assert after_restart[follower] == before[follower]

        # a fourth peer joins after the compaction: snapshot, then the retained log suffix
        cluster.add_outsider("4")
        cluster.start("4")
        wait_for(
            "peer 4 to catch up",
            lambda: (i := cluster.log_info("4")) is not None and i.last_applied >= last,
            timeout=60,
        )
        with SyncRaftClient(cluster.urls[:3], cluster.ident, timeout=30) as client:
            client.config_update([Peer(i, cluster.peers[i].url) for i in ("1", "2", "3", "4")])
        newer = (await topics.publish("orders", b"after join")).index
        everywhere = await _everywhere(cluster, topics, "orders", newer)
        assert set(everywhere) == {"1", "2", "3", "4"}
        assert len({tuple(rows) for rows in everywhere.values()}) == 1
        assert len(everywhere["4"]) == 301
        infos: list[TopicInfo] = [
            await topics.describe("orders", url=p.url) for p in cluster.peers.values()
        ]
        assert len({(i.first, i.last, i.low_water) for i in infos}) == 1
        short_rows = await _everywhere(cluster, topics, "short", newer)
        assert all(rows == [] for rows in short_rows.values())


async def test_size_retention_drops_the_oldest_first_on_every_peer(cluster: PeerCluster) -> None:
    async with topic_client(cluster) as topics:
        await topics.create_topic("sized", max_bytes=1000)
        ids = []
        for n in range(30):  # 100-byte records: the newest 10 fit
            ids.append((await topics.publish("sized", b"%03d" % n + b"x" * 97)).index)
        rows = await _everywhere(cluster, topics, "sized", ids[-1])
        assert len({tuple(r) for r in rows.values()}) == 1
        kept = next(iter(rows.values()))
        assert [r[5][:3] for r in kept] == [b"%03d" % n for n in range(20, 30)]
        for peer in cluster.peers.values():
            with pytest.raises(RecordsExpiredError) as err:
                await topics.read("sized", from_index=ids[0], url=peer.url)
            assert err.value.first_available == (ids[20], 0)
        # raising the limit later does not resurrect what was dropped
        await topics.update_topic("sized", {"max_bytes": 10_000})
        last = (await topics.publish("sized", b"030" + b"x" * 97)).index
        rows = await _everywhere(cluster, topics, "sized", last)
        assert all(len(r) == 11 for r in rows.values())


async def test_per_record_ttl_shorter_than_the_topic(cluster: PeerCluster) -> None:
    with SyncTopicClient(cluster.urls, cluster.ident, timeout=15) as topics:
        topics.create_topic("mixed", retention_ms=WEEK_MS)
        assert topics.create_topic("mixed", exist_ok=True) is None
        topics.publish("mixed", b"brief", ttl_ms=800)
        kept = topics.publish("mixed", b"kept")
        topics.publish_batch([make_record("mixed", b"brief too", ttl_ms=800)])
        assert [r.record.value for r in topics.read("mixed").records] == [
            b"brief",
            b"kept",
            b"brief too",
        ]
        deadline = time.monotonic() + 15
        for peer in cluster.peers.values():
            while True:
                values = [r.record.value for r in topics.read("mixed", url=peer.url).records]
                if values == [b"kept"] or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert values == [b"kept"], peer.id
            assert topics.describe("mixed", url=peer.url).first == kept


async def test_a_follower_across_delete_and_recreate_sees_only_the_new_incarnation(
    cluster: PeerCluster,
) -> None:
    async with topic_client(cluster) as topics:
        unknown = admin(cluster, "read", "--topic", "t5", "--follow")
        assert unknown.returncode == 1 and "UnknownTopic" in unknown.stderr
        await topics.create_topic("t5", retention_ms=WEEK_MS)
        await topics.publish("t5", b"old-incarnation")
        seen: list[bytes] = []

        async def follow() -> None:
            async for item in topics.subscribe(["t5"], poll_interval=0.02):
                seen.append(item.record.value)
                if item.record.value == b"new-incarnation":
                    return

        follower = asyncio.ensure_future(follow())
        async with asyncio.timeout(10):
            while seen != [b"old-incarnation"]:
                await asyncio.sleep(0.02)
        await topics.delete_topic("t5")
        await asyncio.sleep(0.1)  # the follower polls the deleted topic
        await topics.create_topic("t5")
        await topics.publish("t5", b"new-incarnation")
        await asyncio.wait_for(follower, 10)
        assert seen == [b"old-incarnation", b"new-incarnation"]
        fresh = [item.record.value async for item in _first(topics.subscribe(["t5"]), 1)]
        assert fresh == [b"new-incarnation"]  # a new follower: the new incarnation only


async def _first(stream: object, n: int) -> object:
    out = 0
    async for item in stream:  # type: ignore[attr-defined]
        yield item
        out += 1
        if out >= n:
            return


# -- follow vs read on random workloads ---------------------------------------------------------

Op = tuple[str, int, int]
"""(action, size, ttl flag): publish a batch, delete + re-create, or shrink the size limit."""

OPS = st.lists(
    st.tuples(
        st.sampled_from(["publish", "publish", "publish", "recreate", "limit"]),
        st.integers(1, 3),
        st.integers(0, 1),
    ),
    min_size=3,
    max_size=12,
)


async def _collect(topics: TopicClient, topic: str, upto: int) -> list[Row]:
    """What a follower started now yields until it has covered applied index ``upto``."""
    out: list[Row] = []
    stream = topics.subscribe([topic], poll_interval=0.02)
    async with asyncio.timeout(20):
        async for item in stream:
            r = item.record
            out.append(
                (item.id.index, item.id.position, item.append_time_ms, r.topic, r.key, r.value)
            )
            if item.id.index >= upto:
                break
    await stream.aclose()  # type: ignore[attr-defined]
    return out


async def _workload(cluster: PeerCluster, name: str, ops: list[Op]) -> None:
    async with topic_client(cluster) as topics:
        await topics.create_topic(name, retention_ms=WEEK_MS)
        live: list[Row] = []

        async def follow() -> None:
            async for item in topics.subscribe([name], poll_interval=0.02):
                r = item.record
                live.append(
                    (item.id.index, item.id.position, item.append_time_ms, r.topic, r.key, r.value)
                )

        follower = asyncio.ensure_future(follow())
        for n, (action, size, ttl) in enumerate(ops):
            if action == "publish":
                batch = [
                    make_record(name, b"%d-%d" % (n, k) * 8, ttl_ms=WEEK_MS if ttl else None)
                    for k in range(size)
                ]
                await topics.publish_batch(batch)
            elif action == "recreate":
                await topics.delete_topic(name)
                await topics.create_topic(name, max_bytes=100 * size)
            else:
                await topics.update_topic(name, {"max_bytes": 40 * size})
        marker = (await topics.publish(name, b"end")).index
        await asyncio.sleep(0)
        for peer in cluster.peers.values():
            if peer.running:
                await wait_applied(topics, name, peer.url, marker)
        expected = await read_all(topics, name, cluster.urls[0])
        assert expected and expected[-1][5] == b"end"
        assert await _collect(topics, name, marker) == expected  # follow == read
        async with asyncio.timeout(10):
            while not live or live[-1][5] != b"end":
                await asyncio.sleep(0.02)
        follower.cancel()
        # the live follower: log order, no duplicates, nothing retained missed
        assert [r[:2] for r in live] == sorted({r[:2] for r in live})
        assert set(expected) <= set(live)


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)
@given(ops=OPS)
def test_follow_and_read_agree_on_random_workloads(cluster: PeerCluster, ops: list[Op]) -> None:
    name = f"prop-{time.monotonic_ns()}"
    asyncio.run(_workload(cluster, name, ops))
