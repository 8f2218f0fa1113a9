"""Read consistency levels against real peers (issue #29; docs/client.md, "Read consistency").

One three-peer cluster for the module. The stale-leader test runs last: it pauses the
leader (SIGSTOP) until the others elect a successor, sends the paused peer linearizable reads
straight into its socket, resumes it, and checks every answer against the writes
acknowledged before the reads were sent -- a stale leader refuses (or, once it learnt of its
successor, answers with fresh data), it never serves its old state.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest
import zmq
from raftlog_spark.logclient import LogClient

from integration.cluster import PEER_BIN, PeerCluster, probe, wait_for
from integration.rest.helpers import RestCluster, call, started
from integration.topics.helpers import topic_client
from raftlog import sockets
from raftlog.client import IndexedEntry, RaftClient
from raftlog.client.consistency import read_index
from raftlog.ids import RequestIdGenerator
from raftlog.rpc.messages import RequestEntries, RequestEntriesResponse
from raftlog.rpc.reads import TYPE_READ_INDEX, decode_read_index_answer
from raftlog.topics import wire as rpc
from raftlog.topics.client import TopicClient
from raftlog.topics.wire_reads import not_served_leader, with_level

TOPIC = "ledger"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestCluster]:
    c = started(tmp_path_factory.mktemp("reads"))  # REST listeners too: one cluster for all
    try:
        yield c
    finally:
        for peer in c.peers.values():  # never leave a stopped peer behind
            if peer.process is not None and peer.process.poll() is None:
                os.kill(peer.process.pid, signal.SIGCONT)
        c.stop()


def _followers(cluster: PeerCluster, leader: str) -> list[str]:
    return [peer_id for peer_id in cluster.peers if peer_id != leader]


async def test_read_index_is_the_leaders_and_followers_refuse(cluster: PeerCluster) -> None:
    leader = cluster.wait_stable_leader()
    async with (
        RaftClient(cluster.urls, cluster.ident, timeout=15.0) as client,
        TopicClient(client) as topics,
    ):
        await topics.create_topic(TOPIC, exist_ok=True)
        written = (await topics.publish(TOPIC, b"first")).index
        index = await read_index(client)
        assert index >= written
        follower = cluster.peers[_followers(cluster, leader)[0]].url
        answer = await client.peer_request(follower, TYPE_READ_INDEX, [])
        assert decode_read_index_answer(answer) == leader  # refused, naming the leader


@pytest.mark.parametrize("consistency", ["linearizable", "read_your_writes", "any"])
async def test_every_peer_serves_the_write_at_each_level(
    cluster: PeerCluster, consistency: str
) -> None:
    async with topic_client(cluster) as topics:
        await topics.create_topic(TOPIC, exist_ok=True)
        written = await topics.publish(TOPIC, consistency.encode())
        for peer in cluster.peers.values():
            if consistency == "any":  # no guarantee: only that the level is accepted
                await topics.read(TOPIC, url=peer.url, consistency=consistency)
                continue
            result = await topics.read(
                TOPIC, url=peer.url, from_index=written.index, consistency=consistency
            )
            assert [r.id for r in result.records] == [written], (peer.id, consistency)


async def test_raw_entries_streams_at_a_level_reach_the_last_write(cluster: PeerCluster) -> None:
    leader = cluster.wait_stable_leader()
    follower = cluster.peers[_followers(cluster, leader)[0]].url
    async with RaftClient(cluster.urls, cluster.ident, timeout=15.0) as client:
        written = await client.request_update(b"raw write")
        for consistency, peer in [
            ("linearizable", None),
            ("linearizable", follower),
            ("read_your_writes", follower),
        ]:
            last = 0
            stream = client.request_entries(
                max(0, written - 1), from_peer=peer, consistency=consistency
            )
            async with stream:
                async for item in stream:
                    assert isinstance(item, IndexedEntry)
                    last = item.index
            assert last >= written, (consistency, peer)


def test_a_follower_takes_the_read_index_from_the_leader_for_a_raw_read(
    cluster: RestCluster,
) -> None:
    """A client that only sets the flags (any language, no RI of its own): the follower asks
    the leader over its peer channel and serves once it has applied the index."""
    leader = cluster.wait_stable_leader()
    follower = cluster.peers[_followers(cluster, leader)[0]].url
    written = asyncio.run(_publish_at(cluster, b"raw linearizable"))
    body = with_level(rpc.encode_read_request(rpc.ReadRequest(TOPIC, from_index=written)),
                      min_index=0, linearizable=True)
    ctx = zmq.Context()
    try:
        sock = _send_raw(ctx, follower, cluster.ident.encode(), rpc.TYPE_READ, body, b"\x01")
        answer = _answer(sock, 10)
        sock.close(linger=0)
    finally:
        ctx.destroy(linger=0)
    assert answer is not None and not not_served_leader(answer)[0]
    assert [r.id.index for r in rpc.decode_read_response(answer).records] == [written]
    [got] = probe(follower, cluster.ident, RequestEntries(written - 1, 1, 0, True, 0, True),
                  timeout=10)
    assert isinstance(got, RequestEntriesResponse) and got.last_index == written


def test_rest_poll_at_each_level_from_a_follower(cluster: RestCluster) -> None:
    base = cluster.http_url(cluster.follower())
    path = f"/v1/namespaces/default/topics/{TOPIC}"
    assert call(base, "PUT", path).status in (200, 409)
    published = call(base, "POST", path + "/publish", {"messages": ["rest"], "encoding": "text"})
    assert published.status == 200, published.body
    written = published.body["ids"][0]
    index = int(written.split("-")[0])
    for level in [{"consistency": "linearizable"},
                  {"consistency": "read_your_writes", "minIndex": index}]:
        answer = call(base, "POST", path + "/poll", {"startFrom": written, **level})
        assert answer.status == 200, answer.body
        assert [m["id"] for m in answer.body] == [written], level
    for bad in [{"consistency": "read_your_writes"}, {"consistency": "strong"},
                {"consistency": "any", "minIndex": -1}]:
        answer = call(base, "POST", path + "/poll", bad)
        assert answer.status == 400 and answer.body["error"] == "BadRequest", bad


def test_cli_read_takes_a_consistency(cluster: RestCluster) -> None:
    leader = cluster.wait_stable_leader()
    follower = cluster.peers[_followers(cluster, leader)[0]].url
    admin = [str(PEER_BIN.with_name("raftlog-admin")), "--peers", ",".join(cluster.urls),
             "--ident", cluster.ident]
    written = asyncio.run(_publish_at(cluster, b"cli"))
    for topic, extra in (([], ["--consistency", "linearizable"]),
                         (["--topic", TOPIC],
                          ["--consistency", "read_your_writes", "--min-index", str(written)])):
        out = subprocess.run(
            [*admin, "read", "--from", str(written), "--json", "--from-peer", follower,
             *topic, *extra], capture_output=True, text=True, timeout=60, check=False,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip(), (topic, extra)
    refused = subprocess.run([*admin, "read", "--consistency", "strong"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode != 0 and "consistency" in refused.stderr


def test_the_spark_source_plans_up_to_the_read_index(cluster: PeerCluster) -> None:
    """``consistency=linearizable`` (the Spark source's option): the planned end covers a
    write acknowledged just before planning."""
    with LogClient(tuple(cluster.urls), cluster.ident, 15.0) as client:
        written = client.request_update(b"before planning", RequestIdGenerator().next())
        info = client.log_info("linearizable")
        assert min(info.commit_index, info.last_applied) >= written


async def test_read_your_writes_waits_for_a_lagging_follower(cluster: PeerCluster) -> None:
    """The follower is stopped while the write commits on the other two; the read reaches
    its socket before it wakes, and must still see the write."""
    leader = cluster.wait_stable_leader()
    lagging = cluster.peers[_followers(cluster, leader)[0]]
    assert lagging.process is not None
    async with topic_client(cluster) as topics:
        await topics.create_topic(TOPIC, exist_ok=True)
        os.kill(lagging.process.pid, signal.SIGSTOP)
        try:
            written = await topics.publish(TOPIC, b"while the follower sleeps")
            read = asyncio.create_task(
                topics.read(TOPIC, url=lagging.url, from_index=written.index,
                            consistency="read_your_writes")
            )
            await asyncio.sleep(0.3)  # the read is queued in the stopped peer's socket
        finally:
            os.kill(lagging.process.pid, signal.SIGCONT)
        result = await read
        assert [r.id for r in result.records] == [written]
        assert result.applied >= written.index


def _send_raw(ctx: zmq.Context[zmq.Socket[bytes]], url: str, ident: bytes,
              msg_type: bytes, args: list[bytes], msg_id: bytes) -> zmq.Socket[bytes]:
    sock = sockets.client_dealer(ctx, url)
    sock.send_multipart([msg_id, msg_type, ident, *args])
    return sock


def _answer(sock: zmq.Socket[bytes], timeout: float) -> list[bytes] | None:
    if not sock.poll(int(timeout * 1000)):
        return None
    return sock.recv_multipart()[1:]


def test_a_paused_leader_never_answers_a_linearizable_read_with_old_state(
    cluster: PeerCluster,
) -> None:
    """History over three pauses: each read sent to the stopped old leader after a write
    was acknowledged by its successor is refused, or answered with that write."""
    ctx = zmq.Context()
    ident = cluster.ident.encode()
    checked = 0
    try:
        for round_no in range(3):
            old = cluster.wait_stable_leader()
            peer = cluster.peers[old]
            assert peer.process is not None
            os.kill(peer.process.pid, signal.SIGSTOP)
            try:
                new = cluster.wait_leader(timeout=30, exclude=old)
                written = asyncio.run(_publish_at(cluster, f"round {round_no}".encode()))
                body = with_level(
                    rpc.encode_read_request(rpc.ReadRequest(TOPIC, from_index=written)),
                    min_index=0, linearizable=True,
                )
                tr = _send_raw(ctx, peer.url, ident, rpc.TYPE_READ, body, b"\x01")
                ri = _send_raw(ctx, peer.url, ident, TYPE_READ_INDEX, [], b"\x02")
                time.sleep(0.2)
            finally:
                os.kill(peer.process.pid, signal.SIGCONT)
            try:
                tr_answer, ri_answer = _answer(tr, 10), _answer(ri, 10)
            finally:
                tr.close(linger=0)
                ri.close(linger=0)
            assert tr_answer is not None and ri_answer is not None, "no answer at all"
            refused, named = not_served_leader(tr_answer)
            if not refused:
                result = rpc.decode_read_response(tr_answer)
                assert [r.id.index for r in result.records] == [written], "stale read"
            else:
                assert named in (None, new)
            got = decode_read_index_answer(ri_answer)
            assert not isinstance(got, int) or got >= written, f"stale read index {got}"
            checked += 2
            wait_for("the old leader to follow", lambda o=old: cluster.leader() not in (o, None))
    finally:
        ctx.destroy(linger=0)
    assert checked == 6


async def _publish_at(cluster: PeerCluster, value: bytes) -> int:
    async with topic_client(cluster) as topics:
        await topics.create_topic(TOPIC, exist_ok=True)
        return (await topics.publish(TOPIC, value)).index

