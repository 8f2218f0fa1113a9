"""docs/security.md's threat table (issue #25), row by row, on one CURVE cluster of real
peers: what an unauthenticated network client, a reader, a writer, an admin and a local
user can and cannot do. Each test is one row; its assertions are the row's cells."""

from __future__ import annotations

import asyncio
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
from faults.zmtp import RawDealer

from integration.cluster import PeerCluster
from integration.peer.updates import new_request_id
from integration.secure_setup import ClientSpec, SecureSetup
from integration.security.test_secure_cluster import raw_exchange
from raftlog import sockets
from raftlog.client import RaftClient
from raftlog.errors import (
    AccessDeniedError,
    AuthenticationError,
    QuotaExceededError,
    TransactionNotOwnedError,
)
from raftlog.rpc.denied import access_denied_reason, quota_refusal_of
from raftlog.rpc.messages import (
    ClientDispatch,
    ConfigUpdate,
    Peer,
    RequestEntries,
    RequestLogInfo,
    RequestVote,
)
from raftlog.rpc.request_encoders import encode_request
from raftlog.topics.client import TopicClient
from raftlog.topics.wire import TYPE_READ, ReadRequest, encode_read_request

pytestmark = pytest.mark.timeout(180)

CLIENTS = [
    ClientSpec("admin", "admin"),
    ClientSpec("writer", "writer", publish=["orders", "shop.*"]),
    ClientSpec("reader", "reader", read=["orders"]),
    ClientSpec("slow-writer", "writer", publish=["orders"], quota="{ records_per_s = 0.2 }"),
    ClientSpec("slow-reader", "reader", read=["orders"], quota="{ waiting_reads = 1 }"),
    ClientSpec("jobs-worker", "writer", read=["jobs"], consume=["workers"]),
    ClientSpec("nosy-worker", "writer", read=["jobs"], consume=["other-*"]),
]


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> SecureSetup:
    return SecureSetup(tmp_path_factory.mktemp("threat-keys"), clients=list(CLIENTS))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, secure: SecureSetup) -> Iterator[
    PeerCluster
]:
    with PeerCluster(tmp_path_factory.mktemp("threat"), security=secure) as running:
        running.start()
        running.wait_stable_leader()
        yield running


def client(cluster: PeerCluster, secure: SecureSetup, name: str) -> RaftClient:
    return RaftClient(cluster.urls, cluster.ident, curve=secure.client(name), timeout=20)


@pytest.fixture(scope="module")
def setup_topics(cluster: PeerCluster, secure: SecureSetup) -> str:
    """Topics ``orders`` and ``secret``; an open transaction of the admin's (its id)."""

    async def make() -> str:
        async with client(cluster, secure, "admin") as raw, TopicClient(raw) as admin:
            for name in ("orders", "secret"):
                await admin.create_topic(name)
            tx = await admin.begin_transaction(timeout=600)
            await tx.publish("secret", b"admin's")
            return tx.id

    return asyncio.run(make())


async def test_row_unauthenticated_network_client(
    cluster: PeerCluster, secure: SecureSetup
) -> None:
    """Can: open TCP connections (capped, shed when idle). Cannot: complete a handshake,
    read, publish, list topics, learn the cluster's state or campaign."""
    url = cluster.peers[cluster.wait_leader()].url
    assert raw_exchange(url, cluster.ident, RequestLogInfo(), curve=None) is None
    outsider = secure.client("outsider")
    assert raw_exchange(url, cluster.ident, RequestLogInfo(), curve=outsider) is None
    async with RaftClient(cluster.urls, cluster.ident, curve=outsider, timeout=10) as raw:
        with pytest.raises(AuthenticationError):
            await TopicClient(raw).list_topics()
    vote = RequestVote(candidate_id="1", term=10**6, last_log_index=10**6, last_log_term=10**6)
    assert raw_exchange(url, cluster.ident, vote, curve=None) is None
    try:  # a raw NULL-mechanism client: the CURVE listener ends the connection
        plaintext = RawDealer(url)
        plaintext.send_frame(b"\x01", more=False)
        plaintext.sock.settimeout(5)
        while plaintext.sock.recv(4096):  # the server's READY at most, then the end
            pass
        plaintext.close()
    except OSError:
        pass  # reset: ended all the same


async def test_row_reader(cluster: PeerCluster, secure: SecureSetup, setup_topics: str) -> None:
    """Can: RequestLogInfo, RequestConfig, read and describe the topics of its read ACL,
    list them. Cannot: publish, begin or use a transaction, read another's transaction
    status, see topics outside its ACL, read the raw log when limited to some topics."""
    async with client(cluster, secure, "reader") as raw, TopicClient(raw) as reader:
        await raw.request_log_info()
        await raw.request_config()
        await reader.read("orders")
        assert await reader.list_topics() == ("orders",)  # finding 8: not "secret"
        with pytest.raises(AccessDeniedError, match="may not read topic 'secret'"):
            await reader.read("secret")
        with pytest.raises(AccessDeniedError, match="needs role writer"):
            await reader.publish("orders", b"x")
        with pytest.raises(AccessDeniedError, match="needs role writer"):
            await reader.begin_transaction()
        with pytest.raises(TransactionNotOwnedError):  # finding 3
            await reader.transaction_status(setup_topics)
    url = cluster.peers[cluster.wait_leader()].url
    answer = raw_exchange(url, cluster.ident, RequestEntries(0, 10), secure.client("reader"))
    assert answer is not None and "raw log" in (access_denied_reason(answer) or "")
    # its quota: no more waiting reads than it may hold (issue #25)
    wait = ClientDispatch(TYPE_READ, tuple(encode_read_request(
        ReadRequest("orders", from_time_ms=4_102_444_800_000, wait_ms=10_000))))
    slow = secure.client("slow-reader")
    socks = [sockets.client_dealer(zmq.Context.instance(), url, curve=slow)
             for _ in range(2)]
    try:
        for n, sock in enumerate(socks):
            sock.send_multipart(encode_request(wait, ident=cluster.ident.encode(), id=b"w%d" % n))
        ready = zmq.select(socks, [], [], 5)[0]  # the parked one answers in 10 s, not now
        assert len(ready) == 1
        refusal = quota_refusal_of(ready[0].recv_multipart())
        assert refusal is not None and refusal.kind == "waiting_reads"
    finally:
        for sock in socks:
            sock.close(linger=0)


async def test_row_writer(cluster: PeerCluster, secure: SecureSetup, setup_topics: str) -> None:
    """Can: publish to the topics of its publish ACL, run its own transactions. Cannot:
    publish elsewhere, store into / commit / roll back another's transaction, create or
    delete topics, change the membership."""
    async with client(cluster, secure, "writer") as raw, TopicClient(raw) as writer:
        await writer.publish("orders", b"ok")
        with pytest.raises(AccessDeniedError, match="may not publish to topic 'secret'"):
            await writer.publish("secret", b"x")
        mine = await writer.begin_transaction(timeout=60)
        await mine.publish("orders", b"in a tx")
        await mine.commit()
        theirs = writer.resume_transaction(setup_topics)
        for attempt in (theirs.commit, theirs.rollback):
            with pytest.raises(TransactionNotOwnedError):
                await attempt()
        with pytest.raises(TransactionNotOwnedError):
            await theirs.publish("orders", b"forged")
        with pytest.raises(AccessDeniedError, match="needs role admin"):
            await writer.create_topic("shop.new")
        with pytest.raises(AccessDeniedError, match="needs role admin"):
            await raw.config_update([Peer("9", "tcp://127.0.0.1:9")])
    # its quota: past its publish rate it is refused, the others keep publishing (#25)
    async with client(cluster, secure, "slow-writer") as raw, TopicClient(raw) as slow:
        await slow.publish("orders", b"within the burst")
        with pytest.raises(QuotaExceededError):
            await slow.publish("orders", b"over", timeout=2)
    async with client(cluster, secure, "writer") as raw, TopicClient(raw) as writer:
        for _ in range(5):
            await writer.publish("orders", b"unaffected")


async def test_row_group_consumer(cluster: PeerCluster, secure: SecureSetup) -> None:
    """Consumer groups (issue #27; before the admin row, whose ConfigUpdate leaves a peer
    that does not exist in the configuration). Can: with ``read`` on the topic and
    ``consume`` on the group, lease and ack its records, and see that group in a listing.
    Cannot: lease from, describe or even see a group it may not consume from (a typed
    refusal naming it)."""
    async with client(cluster, secure, "admin") as raw, TopicClient(raw) as admin:
        await admin.create_topic("jobs", exist_ok=True)
        for name in ("workers", "audit"):
            await admin.create_group(name, mode="queue", topics=["jobs"], exist_ok=True,
                                     ack_wait_ms=60_000)
        for n in range(2):
            await admin.publish("jobs", b"job-%d" % n)
        assert set(await admin.list_groups()) >= {"workers", "audit"}  # admin sees all
    async with client(cluster, secure, "jobs-worker") as raw, TopicClient(raw) as worker:
        held = await worker.lease("workers", "w1", 10)
        assert [r.item.record.value for r in held if r.item] == [b"job-0", b"job-1"]
        await worker.ack("workers", "w1", [(r.topic, r.id) for r in held])
        assert (await worker.describe_group("workers")).stats.acked == 2
        assert await worker.list_groups() == ("workers",)
        with pytest.raises(AccessDeniedError, match="may not consume from group 'audit'"):
            await worker.lease("audit", "w1", 10)
    async with client(cluster, secure, "nosy-worker") as raw, TopicClient(raw) as nosy:
        with pytest.raises(AccessDeniedError, match="may not consume from group 'workers'"):
            await nosy.lease("workers", "n1", 10)
        with pytest.raises(AccessDeniedError, match="may not consume from group 'workers'"):
            await nosy.describe_group("workers")
        assert await nosy.list_groups() == ()


async def test_row_admin(cluster: PeerCluster, secure: SecureSetup, setup_topics: str) -> None:
    """Can: everything a client can, topic admin and membership changes, and use (or end)
    any principal's transaction. Cannot: speak as a member peer (vote, append entries)."""
    url = cluster.peers[cluster.wait_leader()].url
    async with client(cluster, secure, "admin") as raw, TopicClient(raw) as admin:
        await admin.create_topic("shop.admin")
        assert (await admin.transaction_status(setup_topics)).owner == "admin"
        assert set(await admin.list_topics()) >= {"orders", "secret", "shop.admin"}
    forged = RequestVote(candidate_id="1", term=10**6, last_log_index=10**6, last_log_term=1)
    answer = raw_exchange(url, cluster.ident, forged, secure.client("admin"))
    assert answer is not None
    assert "is not a member peer" in (access_denied_reason(answer) or "")
    change = ConfigUpdate(new_request_id(), (Peer("9", "tcp://127.0.0.1:9"),))
    answer = raw_exchange(url, cluster.ident, change, secure.client("admin"))
    assert answer is not None and access_denied_reason(answer) is None  # allowed (refused
    # by the cluster's own rules, not by the guard)


def test_row_local_user(cluster: PeerCluster, secure: SecureSetup) -> None:
    """Another account on a peer's host. Can: connect like a network client (and no more).
    Cannot: read the log, snapshots, topic index or hard state (0700/0600), or a secret key
    (0600)."""
    for peer in cluster.peers.values():
        for path in [peer.data_dir, *peer.data_dir.rglob("*")]:
            mode = stat.S_IMODE(path.stat().st_mode)
            assert not mode & 0o077, f"{path}: {mode:04o}"
    for secret in Path(secure.keys_dir).glob("*.key_secret"):
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600, secret

