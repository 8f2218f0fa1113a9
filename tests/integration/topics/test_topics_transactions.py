"""Transactions on three real peers (issue #18): atomic across a leader's kill -9, exactly
once across retries, interleaved on the same topics, and read_committed for subscribers and
topic readers running across commits and rollbacks."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from pathlib import Path

import pytest

from integration.cluster import PEER_BIN, PeerCluster, wait_for
from raftlog.client import SyncRaftClient
from raftlog.errors import (
    TransactionAbortedError,
    TransactionExpiredError,
    UnknownTransactionError,
)
from raftlog.rpc.messages import Peer
from raftlog.topics import SyncTopicClient
from raftlog.topics.client import TopicClient
from raftlog.topics.records import LoggedRecord, Record

from .helpers import Row, read_all, start_cluster, topic_client, wait_applied

pytestmark = pytest.mark.timeout(120)


async def _same_everywhere(
    topics: TopicClient, cluster: PeerCluster, topic: str, upto: int
) -> list[Row]:
    """The topic as every running peer serves it once each applied ``upto`` (all equal)."""
    views = []
    for peer in cluster.peers.values():
        if peer.running:
            await wait_applied(topics, topic, peer.url, upto)
            views.append(await read_all(topics, topic, peer.url))
    assert all(view == views[0] for view in views[1:]), views
    return views[0]


def _new_leader(cluster: PeerCluster, old: str) -> str:
    return wait_for(
        "a new leader", lambda: (lid := cluster.wait_stable_leader(30)) != old and lid, 40
    )


async def test_atomic_across_leader_kill9_committed_all_aborted_and_expired_none(
    tmp_path: Path,
) -> None:
    cluster = start_cluster(tmp_path)
    try:
        async with topic_client(cluster) as topics:
            await topics.create_topic("orders")
            await topics.create_topic("audit")
            keep = await topics.begin_transaction(timeout=120)
            drop = await topics.begin_transaction(timeout=120)
            late = await topics.begin_transaction(timeout=3)
            retried_rid = topics.raft_client.new_request_id()
            for n in range(5):
                await keep.publish("orders", b"k%d" % n)
                await drop.publish("orders", b"d%d" % n)
            await keep.store("audit", [b"a0", b"a1"], request_id=retried_rid)
            await late.publish("orders", b"late")
            visible = await topics.publish("orders", b"plain-before")

            old = cluster.wait_stable_leader(20)
            cluster.kill(old)  # SIGKILL mid-transaction: only what was fsynced survives
            _new_leader(cluster, old)

            # the same request id at the new leader: appended once, not twice
            await keep.store("audit", [b"a0", b"a1"], request_id=retried_rid)
            assert (await keep.status()).records == 7
            for n in range(5, 10):
                await keep.publish("orders", b"k%d" % n)
                await drop.publish("orders", b"d%d" % n)
            leader_url = cluster.peers[cluster.wait_stable_leader(20)].url
            before = await read_all(topics, "orders", leader_url)
            assert [r[5] for r in before] == [b"plain-before"]  # the open ones: invisible
            commit = await keep.commit()
            await drop.rollback()
            # the short transaction times out by the log clock: the new leader ticks for it
            async with asyncio.timeout(30):
                while (await late.status()).state == "open":
                    await asyncio.sleep(0.2)
            assert (await late.status()).state == "expired"
            with pytest.raises(TransactionExpiredError):
                await late.commit()
            with pytest.raises(TransactionAbortedError):
                await drop.commit()
            last = (await topics.publish("orders", b"plain-after")).index

            cluster.start(old)  # it catches up: same visibility as the others
            orders = await _same_everywhere(topics, cluster, "orders", last)
            assert [r[5] for r in orders] == [b"plain-before"] + [
                b"k%d" % n for n in range(10)
            ] + [b"plain-after"]
            assert orders[0][0] == visible.index
            # committed records sit at the commit's index, in store order across topics
            assert [(r[0], r[1]) for r in orders[1:11]] == [
                (commit, k) for k in (0, 1, 2, 3, 4, 7, 8, 9, 10, 11)
            ]
            audit = await _same_everywhere(topics, cluster, "audit", last)
            assert [(r[0], r[1], r[5]) for r in audit] == [(commit, 5, b"a0"), (commit, 6, b"a1")]
            info = await topics.transaction_status(keep.id, url=cluster.peers[old].url)
            assert (info.state, info.commit_index, info.records) == ("committed", commit, 12)
            assert info.record_ids[0].index == commit and info.record_ids[-1].position == 11

            # the leader dies while a commit is in flight: the client retries the same request
            # id at the next leader; whether the commit made it or not, the outcome is "all,
            # once" (or the retry commits it)
            again = await topics.begin_transaction(timeout=120)
            await again.store("orders", [b"x0", b"x1", b"x2"])
            leader = cluster.wait_stable_leader(20)
            committing = asyncio.create_task(again.commit())
            await asyncio.sleep(0.005)
            cluster.kill(leader)
            second = await committing
            orders = await _same_everywhere(topics, cluster, "orders", second)
            assert [r[5] for r in orders if r[0] == second] == [b"x0", b"x1", b"x2"]
            assert [r[5] for r in orders].count(b"x0") == 1
    finally:
        cluster.stop()


async def _subscribe(topics: TopicClient, names: list[str], out: list[LoggedRecord]) -> None:
    async for item in topics.subscribe(names, poll_interval=0.05):
        out.append(item)


async def test_interleaved_transactions_and_readers_see_only_committed_records_once(
    tmp_path: Path,
) -> None:
    cluster = start_cluster(tmp_path)
    try:
        async with topic_client(cluster) as topics:
            await topics.create_topic("t1")
            await topics.create_topic("t2")
            seen: list[LoggedRecord] = []
            follower_url = next(
                p.url for p in cluster.peers.values() if p.id != cluster.wait_stable_leader(20)
            )
            follower = asyncio.create_task(_subscribe(topics, ["t1", "t2"], seen))
            expected: set[bytes] = set()

            async def producer(n: int) -> None:
                tx = await topics.begin_transaction(timeout=60)
                for k in range(6):
                    await tx.publish("t1" if k % 2 else "t2", b"tx%d-%d" % (n, k))
                    await asyncio.sleep(0)  # let the other producers interleave
                if n % 3 == 2:
                    await tx.rollback()
                else:
                    await tx.commit()
                    expected.update(b"tx%d-%d" % (n, k) for k in range(6))

            async def plain() -> None:
                for k in range(10):
                    await topics.publish("t1", b"plain-%d" % k)
                    expected.add(b"plain-%d" % k)

            # a reader paging through t1 at a follower while transactions come and go
            pages: list[bytes] = []

            async def reader() -> None:
                after = None
                for _ in range(40):
                    kw = {} if after is None else {
                        "from_index": after[0], "from_position": after[1], "inclusive": False
                    }
                    page = await topics.read("t1", url=follower_url, **kw)  # type: ignore[arg-type]
                    pages.extend(r.record.value for r in page.records)
                    if page.records:
                        after = (page.records[-1].id.index, page.records[-1].id.position)
                    await asyncio.sleep(0.05)

            await asyncio.gather(*(producer(n) for n in range(6)), plain(), reader())
            # a context-managed transaction that raises: rolled back, nothing visible
            with contextlib.suppress(RuntimeError):
                async with topics.transaction(timeout=30) as tx:
                    await tx.publish("t1", b"never")
                    raise RuntimeError("the block failed")
            with pytest.raises(TransactionAbortedError):
                await tx.commit()
            async with topics.transaction(timeout=30) as tx:
                await tx.publish("t2", b"last")
            expected.add(b"last")
            async with asyncio.timeout(30):
                while len(seen) < len(expected):
                    await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)  # anything extra (a duplicate, a rolled-back one) shows
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower
            values = [r.record.value for r in seen]
            assert sorted(values) == sorted(expected)  # each committed record exactly once
            assert [r.id for r in seen] == sorted(r.id for r in seen)  # in log order
            assert not any(v.startswith(b"tx2-") or v.startswith(b"tx5-") for v in pages)
            assert len(pages) == len(set(pages))
            final = await read_all(topics, "t1", follower_url)
            assert set(pages) <= {r[5] for r in final}
            # each committed transaction's records are contiguous at its commit's index
            by_tx: dict[bytes, set[int]] = {}
            for r in seen:
                by_tx.setdefault(r.record.value.split(b"-")[0], set()).add(r.id.index)
            assert all(len(v) == 1 for k, v in by_tx.items() if k.startswith(b"tx"))
    finally:
        cluster.stop()


def test_sync_client_transactions_resume_across_clients(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path)
    try:
        with (
            SyncTopicClient(cluster.urls, cluster.ident, timeout=15.0) as one,
            SyncTopicClient(cluster.urls, cluster.ident, timeout=15.0) as two,
        ):
            one.create_topic("s")
            tx = one.begin_transaction(timeout=60, txid="cdap-write-pointer-42")
            tx.store("s", [b"a", Record("s", b"b", key=b"k")])
            again = one.begin_transaction(timeout=60, txid=tx.id, exist_ok=True)
            assert again.id == tx.id
            resumed = two.resume_transaction(tx.id)  # another client, another "request"
            resumed.publish("s", b"c", headers={"h": b"v"})
            assert one.read("s").records == ()
            index = resumed.commit()
            got = one.read("s").records
            assert [(r.id.index, r.id.position, r.record.value) for r in got] == [
                (index, 0, b"a"), (index, 1, b"b"), (index, 2, b"c")
            ]
            assert got[1].record.key == b"k" and got[2].record.headers == {"h": b"v"}
            with pytest.raises(RuntimeError), one.transaction(timeout=10) as failed:
                failed.publish("s", b"x")
                raise RuntimeError("boom")
            assert one.transaction_status(failed.id).state == "aborted"
            with pytest.raises(UnknownTransactionError):
                two.resume_transaction("never-begun").commit()
            with one.transaction() as ok:
                ok.publish("s", b"d")
            assert [r.record.value for r in one.read("s").records] == [b"a", b"b", b"c", b"d"]
    finally:
        cluster.stop()


async def test_compaction_stops_before_an_open_transaction_and_a_new_peer_agrees(
    tmp_path: Path,
) -> None:
    # request ids must not pin the log, so `compact` has work to do
    cluster = start_cluster(tmp_path, raft={"request_id_ttl": None, "request_id_cache_max": 50})
    try:
        async with topic_client(cluster) as topics:
            raft = topics.raft_client
            await topics.create_topic("kept")
            await topics.create_topic("short", retention_ms=500)
            async with topics.transaction() as gone:  # committed, then expired: garbage
                await gone.store("short", [b"s1", b"s2"])
            dropped = await topics.begin_transaction()  # rolled back: garbage
            await dropped.publish("kept", b"never")
            await dropped.rollback()
            for n in range(100):
                await raft.request_update(b"plain %d" % n)
            opened = await topics.begin_transaction(timeout=300)
            begin = (await opened.status()).begin_index
            await opened.publish("kept", b"k1")
            for n in range(100):
                last = await raft.request_update(b"more %d" % n)
            await asyncio.sleep(1.0)  # "short" expires (the leader's clock tick)
            for peer in cluster.peers.values():
                await wait_applied(topics, "short", peer.url, last)
                async with asyncio.timeout(10):
                    while (await topics.describe("short", url=peer.url)).first is not None:
                        await asyncio.sleep(0.1)

            compacted = await asyncio.to_thread(_compact_all, cluster)
            assert set(compacted.values()) == {begin - 1}, compacted  # not into the open one

            # a fourth peer joins: the snapshot, then the open transaction's entries
            cluster.add_outsider("4")
            cluster.start("4")
            wait_for(
                "peer 4 to catch up",
                lambda: (i := cluster.log_info("4")) is not None and i.last_applied >= last,
                timeout=60,
            )
            with SyncRaftClient(cluster.urls[:3], cluster.ident, timeout=30) as client:
                client.config_update([Peer(i, cluster.peers[i].url) for i in ("1", "2", "3", "4")])
            await opened.publish("kept", b"k2")
            commit = await opened.commit()
            everywhere = {
                p.id: (await wait_applied(topics, "kept", p.url, commit),
                       await read_all(topics, "kept", p.url))[1]
                for p in cluster.peers.values()
            }
            assert len({tuple(rows) for rows in everywhere.values()}) == 1, everywhere
            assert [(r[0], r[1], r[5]) for r in everywhere["4"]] == [
                (commit, 0, b"k1"), (commit, 1, b"k2")
            ]
            shorts = [await read_all(topics, "short", p.url) for p in cluster.peers.values()]
            assert shorts == [[]] * 4
            # committed and retained: its stores must stay, so compaction still stops there
            again = await asyncio.to_thread(_compact_all, cluster)
            assert set(again.values()) <= {0, begin - 1}, again
    finally:
        cluster.stop()


def _compact_all(cluster: PeerCluster) -> dict[str, int]:
    done = subprocess.run(
        [str(PEER_BIN.with_name("raftlog-admin")), "--config", str(cluster.config_path),
         "--timeout", "20", "compact"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    out = {}
    for line in done.stdout.splitlines():
        url, text = line.split("\t")
        out[url] = int(text.split()[-1]) if text.startswith("compacted to") else 0
    return out
