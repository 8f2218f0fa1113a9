"""Consumer groups on three real peers (issue #27), one cluster for the module:

* three queue members, one killed with -9 while it holds leases: its records go to the
  others, none is lost, none is delivered more than ``max_deliveries`` times, and the
  dead-letter topic holds exactly the poison records with their headers;
* the leader killed with -9 while a member acks: every record acked exactly once;
* a stream group resumes exactly after its last commit across member restarts and a
  whole-cluster restart;
* in each, the group state is identical on every peer;
* REST: poll with a group and the ack endpoint (the cluster serves REST for that);
* push fetch (``TF``): held until ``min_records`` arrive, answered within the credit;
* a follower rebuilt from InstallSnapshot holds the same groups as the others;
* a stream topic's claim fails over to another member when its holder stops renewing.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from faults.consumers import check_groups

from integration.cluster import PeerCluster, wait_for
from integration.rest.helpers import RestCluster, call
from raftlog.client import RaftClient
from raftlog.entry import LogEntry
from raftlog.topics.client import TopicClient
from raftlog.topics.groups.consumer import SyncConsumer
from raftlog.topics.groups.model import GroupInfo
from raftlog.topics.sync_client import SyncTopicClient
from raftlog.topics.wire import ReadResult

pytestmark = pytest.mark.timeout(120)
TESTS = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    with RestCluster(tmp_path_factory.mktemp("groups")) as c:
        c.start()
        c.wait_stable_leader(20)
        yield c


@pytest.fixture
def topics(cluster: PeerCluster) -> Iterator[SyncTopicClient]:
    for peer_id, peer in cluster.peers.items():  # a previous test may have stopped some
        if not peer.running:
            cluster.start(peer_id)
    cluster.wait_stable_leader(20)
    with SyncTopicClient(cluster.urls, cluster.ident, timeout=30.0) as client:
        yield client


def same_everywhere(topics: SyncTopicClient, cluster: PeerCluster, group: str) -> GroupInfo:
    """Wait until every peer has applied what the leader has, then the group must be the
    same on each (the state machine is deterministic); returns the leader's view."""
    leader = topics.describe_group(group)

    def views() -> list[GroupInfo] | None:
        out = [topics.describe_group(group, url=url) for url in cluster.urls]
        if any(v.applied < leader.applied for v in out):
            return None
        return out

    found = wait_for("every peer applied the group", views, timeout=30)
    final = list(found)
    strip = [(v.name, v.mode, v.topics, v.options, v.positions, v.stats) for v in final]
    assert all(s == strip[0] for s in strip[1:]), strip
    queue = [(v.queue, v.members) for v in final]
    assert all(q == queue[0] for q in queue[1:]), queue
    return final[0]


def _member(
    cluster: PeerCluster, group: str, name: str, mode: str, out: Path
) -> subprocess.Popen[bytes]:
    path = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.Popen(
        [sys.executable, "-m", "integration.groups.member", ",".join(cluster.urls), cluster.ident,
         group, name, mode, str(out)],
        env=env, stdout=subprocess.DEVNULL, stderr=open(str(out) + ".err", "wb"),
    )


def _lines(path: Path) -> list[tuple[str, int, int, int]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        topic, index, position, deliveries = line.split()
        out.append((topic, int(index), int(position), int(deliveries)))
    return out


def test_member_killed_holding_leases(
    cluster: PeerCluster, topics: SyncTopicClient, tmp_path: Path
) -> None:
    topics.create_topic("jobs")
    values = [b"poison-%d" % n if n % 9 == 4 else b"job-%d" % n for n in range(45)]
    ids = {v: topics.publish("jobs", v) for v in values}
    topics.create_group("workers", mode="queue", topics=["jobs"], ack_wait_ms=1500,
                        max_deliveries=3, max_in_flight=10, dead_letter="jobs.dlq")
    procs = []
    try:
        holder = _member(cluster, "workers", "holder", "hold", tmp_path / "holder")
        procs.append(holder)
        wait_for("the holder's leases", lambda: len(_lines(tmp_path / "holder")) == 10, timeout=30)
        held = {(i, p) for _, i, p, _ in _lines(tmp_path / "holder")}
        holder.kill()  # -9 while it holds ten leases
        holder.wait(10)
        for name in ("w1", "w2"):
            procs.append(_member(cluster, "workers", name, "work", tmp_path / name))

        def settled() -> GroupInfo | None:
            info = topics.describe_group("workers")
            done = info.stats.acked + info.stats.dead_lettered == len(values)
            return info if done and info.pending == 0 and not info.queue["jobs"].redeliver else None

        info = wait_for("every record acked or dead-lettered", settled, timeout=60)
    finally:
        for name in ("w1", "w2"):
            (tmp_path / f"{name}.stop").touch()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
    poison = [v for v in values if v.startswith(b"poison")]
    good = {(ids[v].index, ids[v].position) for v in values if v not in poison}
    seen = _lines(tmp_path / "w1") + _lines(tmp_path / "w2")
    assert {(i, p) for _, i, p, _ in seen} == good  # none lost
    assert all(d <= 3 for *_, d in seen)  # none delivered more than max_deliveries times
    for _, i, p, d in seen:
        if (i, p) in held:
            assert d >= 2  # the killed member's records were redelivered to the others
    assert info.stats.acked == len(good) and info.stats.dead_lettered == len(poison)
    dead = topics.read("jobs.dlq").records
    assert sorted(r.record.value for r in dead) == sorted(poison)
    for r in dead:
        h = {k: v.decode() for k, v in r.record.headers.items()}
        original = ids[r.record.value]
        assert h["raftlog-dlq-group"] == "workers" and h["raftlog-dlq-topic"] == "jobs"
        assert h["raftlog-dlq-id"] == f"{original.index}:{original.position}"
        assert h["raftlog-dlq-attempts"] == "3" and h["raftlog-dlq-reason"] == "poison"
    same_everywhere(topics, cluster, "workers")


def test_leader_killed_during_acks(cluster: PeerCluster, topics: SyncTopicClient) -> None:
    topics.create_topic("orders")
    published = {topics.publish("orders", b"o%d" % n) for n in range(60)}
    topics.create_group("billing", mode="queue", topics=["orders"], ack_wait_ms=10_000)
    acked = []
    killed = None
    with SyncConsumer(topics, "billing", member="m1", batch=5) as consumer:
        while len(acked) < 60:
            message = consumer.next_message(timeout=30)
            assert message is not None, f"stalled after {len(acked)} acks"
            message.ack()
            acked.append(message.id)
            if len(acked) == 20:
                killed = cluster.wait_stable_leader(20)
                cluster.kill(killed)  # -9 between acks; the next ones go to the new leader
    assert killed is not None
    cluster.start(killed)
    assert set(acked) == published and len(acked) == 60
    info = same_everywhere(topics, cluster, "billing")
    assert info.stats.acked == 60 and info.pending == 0  # each acked exactly once


def test_stream_group_resumes_after_its_last_commit(
    cluster: PeerCluster, topics: SyncTopicClient
) -> None:
    topics.create_topic("events")
    ids = [topics.publish("events", b"e%d" % n) for n in range(30)]
    topics.create_group("audit", mode="stream", topics=["events"])

    def take(n: int) -> list[bytes]:
        with SyncConsumer(topics, "audit", batch=7) as consumer:  # a new member each time
            out = []
            for _ in range(n):
                message = consumer.next_message(timeout=20)
                assert message is not None
                out.append(message.value)
                message.ack()
            return out  # leaving the block commits past the acked records

    assert take(10) == [b"e%d" % n for n in range(10)]
    assert take(5) == [b"e%d" % n for n in range(10, 15)]  # a restarted member resumes
    position = same_everywhere(topics, cluster, "audit").positions["events"]
    assert position.next_record == type(ids[15])(ids[14].index, ids[14].position + 1)
    cluster.stop()  # the whole cluster, then back
    cluster.start()
    cluster.wait_stable_leader(20)
    assert take(15) == [b"e%d" % n for n in range(15, 30)]
    assert same_everywhere(topics, cluster, "audit").positions["events"].next_record.index == (
        ids[29].index
    )


def test_rest_poll_with_a_group_and_ack(cluster: RestCluster, topics: SyncTopicClient) -> None:
    topics.create_topic("mail")
    sent = [topics.publish("mail", b"m%d" % n) for n in range(5)]
    topics.create_group("mailers", mode="queue", topics=["mail"], ack_wait_ms=60_000)
    topics.create_group("archive", mode="stream", topics=["mail"])
    base = cluster.http_url(cluster.follower())  # any peer serves it
    path = "/v1/namespaces/default/topics/mail"
    got = call(base, "POST", path + "/poll",
               {"group": "mailers", "member": "r1", "limit": 3, "encoding": "text"})
    assert got.status == 200, got.body
    assert [m["payload"] for m in got.body] == ["m0", "m1", "m2"]
    assert all(m["deliveries"] == 1 for m in got.body)
    ids = [m["id"] for m in got.body]
    acked = call(base, "POST", path + "/ack", {"group": "mailers", "member": "r1", "ids": ids[:2]})
    assert acked.status == 200, acked.body
    nacked = call(base, "POST", path + "/ack",
                  {"group": "mailers", "member": "r1", "ids": ids[2:], "nack": True})
    assert nacked.status == 200, nacked.body
    again = call(base, "POST", path + "/poll", {"group": "mailers", "member": "r2",
                                                "encoding": "text"})
    assert [(m["payload"], m["deliveries"]) for m in again.body] == [
        ("m2", 2), ("m3", 1), ("m4", 1)]
    info = topics.describe_group("mailers")
    assert info.stats.acked == 2 and info.members == {"r2": 3}
    # a stream group: poll from its position, ack commits past the highest id
    first = call(base, "POST", path + "/poll", {"group": "archive", "limit": 2})
    assert [m["id"] for m in first.body] == [f"{r.index}-{r.position}" for r in sent[:2]]
    call(base, "POST", path + "/ack", {"group": "archive", "ids": [first.body[1]["id"]]})
    rest = call(base, "POST", path + "/poll", {"group": "archive", "encoding": "text"})
    assert [m["payload"] for m in rest.body] == ["m2", "m3", "m4"]
    assert call(base, "POST", path + "/ack", {"group": "nope", "ids": ["1-0"]}).status == 404
    assert call(base, "POST", path + "/ack", {"group": "archive", "ids": []}).status == 400


async def test_push_fetch_waits_for_min_records_within_credit(cluster: RestCluster) -> None:
    async with (
        RaftClient(cluster.urls, cluster.ident, timeout=15.0) as raft,
        TopicClient(raft) as topics,
    ):
        await topics.create_topic("feed", exist_ok=True)
        follower = cluster.peers[cluster.follower()].url
        # the follower learns the commit on the next append or tick: read our own write
        # there first, as docs/client.md says a follower read after a write must
        await topics.read("feed", url=follower, consistency="read_your_writes")
        fetch = asyncio.create_task(topics.fetch("feed", follower, wait_ms=20_000,
                                                 min_records=3, max_bytes=12))
        for n in range(2):
            await topics.publish("feed", b"abcd%d" % n)
        await asyncio.sleep(0.5)  # a follower has applied both by now, and still waits
        assert not fetch.done()
        await topics.publish("feed", b"abcd2")
        result = await asyncio.wait_for(fetch, 15)
        # woken by the third record; the 12-byte credit carries two (5 bytes each)
        assert [r.record.value for r in result.records] == [b"abcd0", b"abcd1"]
        assert result.more


async def test_a_follow_is_pushed_records_within_its_credit(cluster: RestCluster) -> None:
    """Topic follow uses ``TF``: a live record reaches a follower that never polls (its
    poll interval is an hour), and no answer carries more than the credit."""
    async with (
        RaftClient(cluster.urls, cluster.ident, timeout=15.0) as raft,
        TopicClient(raft) as topics,
    ):
        await topics.create_topic("pushed", exist_ok=True)
        for n in range(5):
            await topics.publish("pushed", b"abcd%d" % n)  # 5 bytes each
        answers: list[tuple[int, bool]] = []
        fetch = topics.fetch

        async def counted(*args: Any, **kwargs: Any) -> ReadResult:
            result = await fetch(*args, **kwargs)
            answers.append((sum(r.record.size for r in result.records), result.more))
            return result

        topics.fetch = counted  # type: ignore[method-assign]
        stream = topics.subscribe(["pushed"], max_bytes=12, poll_interval=3600)
        values = [(await asyncio.wait_for(stream.__anext__(), 15)).record.value
                  for _ in range(5)]
        assert values == [b"abcd%d" % n for n in range(5)]
        assert answers and all(size <= 12 for size, _ in answers)
        assert any(more for _, more in answers)  # the credit cut a batch
        live = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0.2)  # parked in a waiting fetch by now (or soon: either works)
        await topics.publish("pushed", b"live")
        assert (await asyncio.wait_for(live, 15)).record.value == b"live"
        await stream.aclose()  # type: ignore[attr-defined]


async def test_a_pattern_follow_picks_up_topics_created_later(cluster: RestCluster) -> None:
    async with (
        RaftClient(cluster.urls, cluster.ident, timeout=15.0) as raft,
        TopicClient(raft) as topics,
    ):
        await topics.create_topic("logs.web", exist_ok=True)
        await topics.create_topic("other", exist_ok=True)
        await topics.publish("logs.web", b"w1")
        await topics.publish("other", b"o1")
        stream = topics.subscribe([], pattern="logs.*")
        first = await asyncio.wait_for(stream.__anext__(), 15)
        assert first.record.value == b"w1"
        await topics.create_topic("logs.db", exist_ok=True)  # created after the follow began
        await topics.publish("logs.db", b"d1")
        later = await asyncio.wait_for(stream.__anext__(), 20)
        assert (later.record.topic, later.record.value) == ("logs.db", b"d1")
        await stream.aclose()  # type: ignore[attr-defined]


def test_a_peer_rebuilt_from_a_snapshot_holds_the_same_groups(
    cluster: RestCluster, topics: SyncTopicClient
) -> None:
    """Runs after most of the module: the groups the tests made travel in InstallSnapshot."""
    topics.create_topic("snap", exist_ok=True)
    topics.create_group("snapq", mode="queue", topics=["snap"], exist_ok=True)
    topics.publish("snap", b"s")
    # the fault suite's group checker on this cluster's whole history so far (issue #27)
    names = topics.list_groups()
    for name in names:
        same_everywhere(topics, cluster, name)
    leader = cluster.wait_stable_leader(20)
    log = {i: LogEntry.from_bytes(raw) for i, raw in cluster.read_all(leader)}
    served = {peer: {n: topics.describe_group(n, url=cluster.peers[peer].url) for n in names}
              for peer in cluster.peers}
    report = check_groups(log, served)
    assert report.valid, report
    cluster.compact_all()  # a snapshot on every peer, the log prefix dropped
    victim = cluster.follower()
    cluster.kill(victim)
    shutil.rmtree(cluster.peers[victim].data_dir)  # it comes back empty: InstallSnapshot
    cluster.start(victim)
    topics.lease("snapq", "m", 5)  # a group command after the snapshot
    for name in topics.list_groups():
        same_everywhere(topics, cluster, name)
    rebuilt = cluster.log_info(victim)
    assert rebuilt is not None and rebuilt.first_index > 1  # it did start from a snapshot


def test_a_stream_topic_fails_over_when_its_member_stops_renewing(
    cluster: RestCluster, topics: SyncTopicClient
) -> None:
    topics.create_topic("ticks")
    for n in range(6):
        topics.publish("ticks", b"t%d" % n)
    topics.create_group("tickers", mode="stream", topics=["ticks"], ack_wait_ms=1500)
    first = SyncConsumer(topics, "tickers", member="a", batch=2)
    taken = []
    for _ in range(2):
        message = first.next_message(timeout=10)
        assert message is not None
        taken.append(message.value)
        message.ack()
    first._client._run(first._consumer.commit())  # committed past t1; then "a" stalls
    second = SyncConsumer(topics, "tickers", member="b", batch=2)
    assert second.next_message(timeout=0.3) is None  # "a" still holds the topic
    message = second.next_message(timeout=15)  # its claim runs out: "b" takes over
    assert message is not None and message.value == b"t2" and taken == [b"t0", b"t1"]
    assert topics.describe_group("tickers").owners["ticks"][0] == "b"
    second.close()
