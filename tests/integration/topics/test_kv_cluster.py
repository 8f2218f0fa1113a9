"""Issue #29 end to end on real peer processes: the issue's "Done when" script, N writers
racing at one expectation (CLI processes and client tasks: exactly one wins), and a
compacted topic's key-value view through Raft log compaction, snapshot install to a lagging
peer and to a new one, and restarts -- the same on every peer, and equal to replaying the
writes."""

from __future__ import annotations

import asyncio
import random
import subprocess
import time
from functools import partial

import pytest

from integration.cluster import PEER_BIN, PeerCluster, module_cluster, wait_for
from raftlog.errors import ExpectationFailedError
from raftlog.topics import NO_RECORD, Expectation, SyncTopicClient, TopicClient, make_record

from .helpers import start_cluster, topic_client, wait_applied

ADMIN = PEER_BIN.with_name("raftlog-admin")
WRITERS = 6
CLI_WRITERS = 4
"""Racing ``raftlog-admin`` processes (each a Python start-up: fewer than the tasks)."""


def admin(
    cluster: PeerCluster, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ADMIN), "--config", str(cluster.config_path), "--timeout", "20", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
        check=False,
    )


# request ids do not pin the log, so `compact` reaches what the topics allow
cluster = module_cluster(
    partial(start_cluster, raft={"request_id_ttl": None, "request_id_cache_max": 50}), "kv"
)


def test_the_issues_done_when_script(cluster: PeerCluster) -> None:
    assert admin(cluster, "topics", "create", "accounts", "--cleanup", "compact").returncode == 0
    assert admin(cluster, "kv", "put", "accounts", "alice", "10").returncode == 0
    assert admin(cluster, "kv", "put", "accounts", "alice", "25").returncode == 0
    got = admin(cluster, "kv", "get", "accounts", "alice")
    assert (got.returncode, got.stdout) == (0, "25\n"), got.stderr
    assert admin(cluster, "topics", "create", "ledger").returncode == 0
    opened = admin(
        cluster, "publish", "--topic", "ledger", "--expect-last-id", "none", stdin="opened\n"
    )
    assert opened.returncode == 0, opened.stderr
    last = opened.stdout.split()[-1]  # "...; last id 7:0"
    again = admin(
        cluster, "publish", "--topic", "ledger", "--expect-last-id", "none", stdin="again\n"
    )
    assert again.returncode == 1
    assert "ExpectationFailed" in again.stderr and f"last record id is {last}" in again.stderr
    shown = admin(cluster, "read", "--topic", "ledger")
    assert [line.split("\t")[-1] for line in shown.stdout.splitlines()] == ["opened"]


def test_racing_cli_writers_at_one_expectation_exactly_one_wins(cluster: PeerCluster) -> None:
    assert admin(cluster, "topics", "create", "race").returncode == 0
    winner_id = "none"
    for _round in range(2):  # the empty topic, then the last id the first round gave
        expect = winner_id
        writers = [
            subprocess.Popen(
                [
                    str(ADMIN),
                    "--config",
                    str(cluster.config_path),
                    "--timeout",
                    "20",
                    "publish",
                    "--topic",
                    "race",
                    "--expect-last-id",
                    expect,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(CLI_WRITERS)
        ]
        outcomes = [w.communicate(f"writer {n}\n", timeout=120) for n, w in enumerate(writers)]
        codes = [w.returncode for w in writers]
        assert sorted(codes) == [0] + [1] * (CLI_WRITERS - 1), outcomes
        winner = codes.index(0)
        winner_id = outcomes[winner][0].split()[-1]
        for (_out, err), code in zip(outcomes, codes, strict=True):
            if code:
                assert f"the last record id is {winner_id}" in err, err
    shown = admin(cluster, "read", "--topic", "race")
    assert len(shown.stdout.splitlines()) == 2


async def test_racing_key_writers_in_one_client(cluster: PeerCluster) -> None:
    async with topic_client(cluster) as topics:
        await topics.create_topic("locks", properties={"cleanup_policy": "compact"})

        async def take(n: int) -> int | None:
            try:
                await topics.kv.put("locks", b"leader", b"%d" % n, expect_revision=NO_RECORD)
            except ExpectationFailedError as exc:
                assert exc.current_last is not None
                return None
            return n

        won = [n for n in await asyncio.gather(*(take(n) for n in range(WRITERS))) if n is not None]
        assert len(won) == 1
        held = await topics.kv.get("locks", b"leader")
        assert held is not None and held.record.value == b"%d" % won[0]


def test_the_blocking_faces(cluster: PeerCluster) -> None:
    with SyncTopicClient(cluster.urls, cluster.ident, timeout=20) as topics:
        topics.create_topic("sync-log")
        first = topics.publish("sync-log", b"a", expect_last_id=NO_RECORD)
        with pytest.raises(ExpectationFailedError) as refused:
            topics.publish("sync-log", b"b", expect_last_id=NO_RECORD)
        assert refused.value.current_last == (first.index, first.position)
        topics.publish_batch(
            [make_record("sync-log", b"c")], expect=[Expectation("sync-log", first)]
        )
        topics.create_topic("sync-kv", properties={"cleanup_policy": "compact"})
        kv = topics.kv
        rev = kv.put("sync-kv", b"a", b"1")
        kv.put("sync-kv", b"b", b"2", expect_revision=NO_RECORD)
        kv.put("sync-kv", b"a", b"3", expect_revision=rev)
        gone = kv.delete("sync-kv", b"b")
        item = kv.get("sync-kv", b"a")
        assert item is not None and item.record.value == b"3"
        assert kv.get("sync-kv", b"b") is None and [k for k, _ in kv.keys("sync-kv")] == [b"a"]
        watched = kv.watch("sync-kv", b"", 1)
        events = [next(watched), next(watched)]
        watched.close()
        assert [(e.kind, e.key) for e in events] == [("put", b"a"), ("delete", b"b")]
        assert events[1].revision == gone


async def _views(
    cluster: PeerCluster, topics: TopicClient, topic: str, index: int
) -> dict[str, tuple[object, ...]]:
    out: dict[str, tuple[object, ...]] = {}
    for peer_id, peer in cluster.peers.items():
        if not peer.running:
            continue
        await wait_applied(topics, topic, peer.url, index, timeout=60)  # may be catching up
        keys = await topics.kv.keys(topic, url=peer.url)
        values = {}
        for key, _ in keys:
            item = await topics.kv.get(topic, key, url=peer.url)
            values[key] = None if item is None else item.record.value
        read = await topics.read(topic, url=peer.url)
        live = [(r.id, r.record.key, r.record.tombstone) for r in read.records]
        out[peer_id] = (tuple(keys), values, tuple(live))
    return out


async def _writes(
    topics: TopicClient, topic: str, expected: dict[bytes, bytes], count: int, seed: int
) -> int:
    rng = random.Random(seed)
    last = 0
    for n in range(count):
        key = b"user/%d" % rng.randrange(12)
        if rng.random() < 0.2:
            last = (await topics.kv.delete(topic, key)).index
            expected.pop(key, None)
        else:
            value = b"v%d" % n
            last = (await topics.kv.put(topic, key, value)).index
            expected[key] = value
    return last


async def test_a_read_past_thousands_of_superseded_copies_is_answered_whole(
    cluster: PeerCluster,
) -> None:
    """A key written 6,000 times leaves 6,000 copies until log compaction passes them; a
    read from the topic's start walks past them. The peer stops each walk after
    ``SKIP_SCAN`` copies and goes on with it on later passes (``ContinuedReads``): the
    client gets its records in one answer, as before, and the loop never held the walk."""
    async with topic_client(cluster) as topics:
        await topics.create_topic("copies", properties={"cleanup_policy": "compact"})
        for n in range(6):
            values = [b"%d" % k for k in range(1000 * n, 1000 * n + 1000)]
            await topics.publish_batch([make_record("copies", v, key=b"same") for v in values])
        last = await topics.publish_batch(
            [make_record("copies", b"final", key=b"same"), make_record("copies", b"b", key=b"b")]
        )
        result = await topics.read("copies")
        assert [(r.record.key, r.record.value) for r in result.records] == [
            (b"same", b"final"),
            (b"b", b"b"),
        ]
        assert [r.id for r in result.records] == last and not result.more


async def test_kv_view_through_compaction_snapshot_install_new_peer_and_restarts(
    cluster: PeerCluster,
) -> None:
    expected: dict[bytes, bytes] = {}
    async with topic_client(cluster) as topics:
        for name in await topics.list_topics():  # topics that keep everything pin the log
            if not (await topics.describe(name)).properties.compacted:
                await topics.delete_topic(name)
        created = await topics.create_topic("state", properties={"cleanup_policy": "compact"})
        leader = cluster.wait_stable_leader()
        lagging = next(p for p in cluster.peers if p != leader)
        cluster.terminate(lagging)
        last = await _writes(topics, "state", expected, 150, seed=1)
        running = [p.url for i, p in cluster.peers.items() if i != lagging]
        for url in running:  # the compacted topic pins nothing: only the request ids do
            await wait_applied(topics, "state", url, last)  # a follower may still lag
            # the request-id cache is trimmed to its 50 newest by the peer's housekeeping
            # pass, which may not have run since the writes: compact again until it has
            deadline = time.monotonic() + 20
            while True:
                done = admin(cluster, "compact", "--peer", url)
                assert done.returncode == 0, done.stderr
                reached = done.stdout.split()[-1]
                if reached.isdigit() and int(reached) > (created or 0) + 50:
                    break
                assert time.monotonic() < deadline, done.stdout
                await asyncio.sleep(0.2)
        views = await _views(cluster, topics, "state", last)
        assert len(set(map(repr, views.values()))) == 1
        keys, values, _ = next(iter(views.values()))
        assert values == expected and [k for k, _ in keys] == sorted(expected)  # type: ignore[attr-defined]

        # the lagging peer is behind the leader's first index: it installs the snapshot
        cluster.start(lagging)
        last = await _writes(topics, "state", expected, 30, seed=2)
        views = await _views(cluster, topics, "state", last)
        assert set(views) == {"1", "2", "3"} and len(set(map(repr, views.values()))) == 1
        assert next(iter(views.values()))[1] == expected
        info = cluster.log_info(lagging)  # its log starts after a snapshot, not at 1
        assert info is not None and info.first_index > (created or 0) + 50, info

        # a new peer (outside the configuration) catches up from the snapshot too
        cluster.add_outsider("4")
        cluster.start("4")
        wait_for(
            "peer 4 to catch up",
            lambda: (i := cluster.log_info("4")) is not None and i.last_applied >= last,
            timeout=60,
        )
        views = await _views(cluster, topics, "state", last)
        assert "4" in views and len(set(map(repr, views.values()))) == 1
        cluster.terminate("4")

        # every peer restarts (its index rebuilt from the snapshot and the log)
        for peer_id in ("1", "2", "3"):
            cluster.terminate(peer_id)
            cluster.start(peer_id)
            cluster.wait_stable_leader()
        last = await _writes(topics, "state", expected, 10, seed=3)
        views = await _views(cluster, topics, "state", last)
        assert set(views) == {"1", "2", "3"} and len(set(map(repr, views.values()))) == 1
        assert next(iter(views.values()))[1] == expected

        # a watch from the beginning sees each key's latest change, deletions included
        events = []
        async with asyncio.timeout(20):
            async for event in topics.kv.watch("state", b"user/", 1, url=running[0]):
                events.append(event)
                if event.revision.index >= last:
                    break
        final = {e.key: e.value for e in events if e.kind == "put"}
        assert final == expected
