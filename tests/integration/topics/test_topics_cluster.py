"""Topics on a real 3-peer cluster: publish, identical order everywhere, atomic batches,
reads from a time, refusals, TTL expiry (issue #7)."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from integration.cluster import PeerCluster, module_cluster, probe
from raftlog.client import RaftClient
from raftlog.errors import RecordsExpiredError
from raftlog.rpc.messages import RequestUpdate
from raftlog.topics.client import make_record, publish_data
from raftlog.topics.records import Record, RecordId, TopicError

from .helpers import read_all, start_cluster, topic_client, wait_applied

pytestmark = pytest.mark.timeout(60)


cluster = module_cluster(start_cluster, "topics")


async def test_publish_order_batches_time_reads_and_refusals(cluster: PeerCluster) -> None:
    async with topic_client(cluster) as topics:
        await topics.create_topic("orders")
        await topics.create_topic("audit", max_record_bytes=64)
        assert {"orders", "audit"} <= set(await topics.list_topics())
        with pytest.raises(TopicError, match="TopicExists"):
            await topics.create_topic("orders")

        # refusals are immediate, clear, and leave nothing in the log
        with pytest.raises(TopicError, match="UnknownTopic") as unknown:
            await topics.publish("nosuch", b"x")
        assert "topic_auto_create" in unknown.value.message
        with pytest.raises(TopicError, match="UnknownTopic"):
            await topics.publish_batch([Record("orders", b"lost"), Record("nosuch", b"x")])
        with pytest.raises(TopicError, match="RecordTooLarge"):
            await topics.publish("audit", b"x" * 65)

        # concurrent publishers, single records and atomic batches, two topics
        async def producer(p: int) -> list[RecordId]:
            out: list[RecordId] = []
            for n in range(6):
                if n % 3 == 2:
                    batch = [make_record("orders", b"p%d-%d-%d" % (p, n, k)) for k in range(3)]
                    batch.append(make_record("audit", b"batch p%d-%d" % (p, n)))
                    out += (await topics.publish_batch(batch))[:3]
                else:
                    out.append(await topics.publish("orders", b"p%d-%d" % (p, n), key=b"k%d" % p))
            return out

        published = [rid for ids in await asyncio.gather(*map(producer, range(5))) for rid in ids]
        last = max(rid.index for rid in published)

        # every peer serves the same records in the same order
        views = {}
        for peer in cluster.peers.values():
            await wait_applied(topics, "orders", peer.url, last)
            views[peer.id] = await read_all(topics, "orders", peer.url)
        reference = views["1"]
        assert all(view == reference for view in views.values())
        assert [(r[0], r[1]) for r in reference] == sorted((r.index, r.position) for r in published)
        assert [r[:2] for r in reference] == sorted(r[:2] for r in reference)
        assert not any(r[5] == b"lost" for r in reference)
        times = [r[2] for r in reference]
        assert times == sorted(times)

        # an atomic batch: one entry, consecutive positions, all of it on every topic
        audit = await read_all(topics, "audit", cluster.peers["2"].url)
        assert len(audit) == 10  # two batches per producer
        for entry in audit:
            in_orders = [r for r in reference if r[0] == entry[0]]
            assert [r[1] for r in in_orders] == [0, 1, 2] and entry[1] == 3

        # from a time T: exactly the records appended at or after T, on every peer
        cut = times[len(times) // 2]
        for peer in cluster.peers.values():
            since = await read_all(topics, "orders", peer.url, from_time_ms=cut)
            assert since == [r for r in reference if r[2] >= cut]
            after = await read_all(topics, "orders", peer.url, from_time_ms=cut, inclusive=False)
            assert after == [r for r in reference if r[2] > cut]

        info = await topics.describe("orders", url=cluster.peers["3"].url)
        assert (info.first, info.last) == (
            RecordId(*reference[0][:2]),
            RecordId(*reference[-1][:2]),
        )
        assert info.last_append_time_ms == reference[-1][2]


async def test_plain_request_update_publishes_too_but_a_refused_one_gets_no_answer(
    cluster: PeerCluster,
) -> None:
    async with (
        RaftClient(cluster.urls, cluster.ident, timeout=15.0) as raft,
        topic_client(cluster) as topics,
    ):
        await topics.create_topic("plain")
        index = await raft.request_update(publish_data([Record("plain", b"via =")]))
        result = await topics.read("plain")
        assert [(r.id.index, r.record.value) for r in result.records] == [(index, b"via =")]
        assert result.records[0].append_time_ms > 0  # stamped by the leader
        leader = cluster.peers[(await raft.request_config()).leader_id or ""]
    refused = RequestUpdate(raft.new_request_id(), publish_data([Record("nosuch", b"x")]))
    assert probe(leader.url, cluster.ident, refused, timeout=0.5) == []


async def test_ttl_expiry_hides_records_on_every_peer(cluster: PeerCluster) -> None:
    async with topic_client(cluster) as topics:
        await topics.create_topic("short", retention_ms=1500)
        await topics.create_topic("forever")
        start = time.time()
        first = await topics.publish("short", b"gone soon")
        await topics.publish("forever", b"stays")
        await topics.update_topic("forever", {"retention_ms": None})
        for peer in cluster.peers.values():
            await wait_applied(topics, "short", peer.url, first.index)
            assert [r[5] for r in await read_all(topics, "short", peer.url)] == [b"gone soon"]
        await asyncio.sleep(max(0.0, start + 1.7 - time.time()))
        for peer in cluster.peers.values():
            assert await read_all(topics, "short", peer.url) == []
            with pytest.raises(RecordsExpiredError) as expired:  # not a silent later start
                await read_all(topics, "short", peer.url, from_index=first.index)
            assert expired.value.first_available == (first.index, 1)
            assert (await topics.describe("short", url=peer.url)).first is None
            assert [r[5] for r in await read_all(topics, "forever", peer.url)] == [b"stays"]
        later = await topics.publish("short", b"fresh")  # the topic itself lives on
        for peer in cluster.peers.values():
            await wait_applied(topics, "short", peer.url, later.index)
            assert [r[5] for r in await read_all(topics, "short", peer.url)] == [b"fresh"]


async def test_subscribe_from_index_time_and_end_then_live(cluster: PeerCluster) -> None:
    async with topic_client(cluster) as topics:
        await topics.create_topic("sub-a")
        await topics.create_topic("sub-b")
        first = await topics.publish("sub-a", b"a0")
        await topics.publish("sub-b", b"b0")
        await asyncio.sleep(0.01)  # a distinct append time for the next record
        middle = await topics.publish("sub-a", b"a1")
        info = await topics.read("sub-a", from_index=middle.index)
        t_middle = info.records[0].append_time_ms

        async def take(stream: object, n: int, then: list[bytes]) -> list[bytes]:
            got: list[bytes] = []
            async for logged in stream:  # type: ignore[attr-defined]
                got.append(logged.record.value)
                if len(got) == n:
                    for value in then:  # now live
                        await topics.publish("sub-a", value)
                if len(got) == n + len(then):
                    await stream.aclose()  # type: ignore[attr-defined]
                    return got
            raise AssertionError("stream ended")

        from_start = topics.subscribe(["sub-a"], from_index=first.index)
        assert await asyncio.wait_for(take(from_start, 2, [b"a2"]), 30) == [b"a0", b"a1", b"a2"]
        from_time = topics.subscribe(["sub-a", "sub-b"], from_time_ms=t_middle)
        got = await asyncio.wait_for(take(from_time, 2, [b"a3"]), 30)
        assert got == [b"a1", b"a2", b"a3"]  # b0 and a0 were appended before t_middle
        from_end = topics.subscribe(["sub-b"], start="end")
        end_task = asyncio.create_task(asyncio.wait_for(take(from_end, 1, []), 30))
        n = 0
        while not end_task.done():  # publish until the subscriber, now at the end, sees one
            await topics.publish("sub-b", b"live %d" % n)
            n += 1
            await asyncio.wait([end_task], timeout=0.2)
        (value,) = await end_task
        assert value.startswith(b"live ")  # nothing from before the end (b0)


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def test_idle_followers_park_on_the_peer_and_wake_on_apply(cluster: PeerCluster) -> None:
    """Issue #25 finding 5, the topic follow: 200 caught-up followers of one peer cost it
    next to nothing (each used to re-read every 0.1 s: 2,000 reads a second), and a new
    record still reaches every one of them at once."""
    async with topic_client(cluster) as topics:
        await topics.create_topic("idle-follow")
        leader = cluster.wait_leader()
        process = cluster.peers[leader].process
        assert process is not None
        before = _cpu_seconds(process.pid)
        await asyncio.sleep(3.0)
        quiet = _cpu_seconds(process.pid) - before

        async def first_record(stream: object) -> bytes:
            async for logged in stream:  # type: ignore[attr-defined]
                await stream.aclose()  # type: ignore[attr-defined]
                return bytes(logged.record.value)
            raise AssertionError("stream ended")

        followers = [
            asyncio.create_task(first_record(topics.subscribe(["idle-follow"], start="end")))
            for _ in range(200)
        ]
        await asyncio.sleep(1.5)  # every follower read the topic and parked
        before = _cpu_seconds(process.pid)
        await asyncio.sleep(3.0)
        idle_cost = _cpu_seconds(process.pid) - before
        started = time.monotonic()
        await topics.publish("idle-follow", b"wake")
        got = await asyncio.wait_for(asyncio.gather(*followers), 20)
        woke_in = time.monotonic() - started
    assert got == [b"wake"] * 200
    assert woke_in < 5.0
    # on main (a read every 0.1 s each) this was 5-7 times an idle leader's cost
    assert idle_cost < 2 * quiet + 0.1, f"{idle_cost:.2f}s of CPU in 3 s vs {quiet:.2f}s idle"
