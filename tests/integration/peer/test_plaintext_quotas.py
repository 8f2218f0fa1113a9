"""Quotas per source address on a real plaintext peer (issue #25, item 2): the cluster
file's ``[quotas]`` table, libzmq's ``Peer-Address`` as the principal. Loopback source
addresses 127.0.0.2 and 127.0.0.3 get a bucket each; 127.0.0.1, the member's own address
(its REST gateway forwards from it), is never limited on ZeroMQ. A ``TP`` publish over quota
gets the typed refusal, a reference-style ``=`` RequestUpdate is dropped (its client
retries after its timeout) and nothing is appended; REST answers 429 (per address there
too); the refusals are counted under the one label value ``address``."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import zmq

from integration.cluster import PeerCluster
from integration.peer.updates import new_request_id
from raftlog.client import RaftClient
from raftlog.rpc.denied import quota_refusal_of
from raftlog.rpc.messages import ClientDispatch, Request, RequestUpdate
from raftlog.rpc.request_encoders import encode_request
from raftlog.topics.client import TopicClient
from raftlog.topics.records import Record, encode_records
from raftlog.topics.wire import TYPE_PUBLISH

pytestmark = pytest.mark.timeout(120)
_CTX = zmq.Context.instance()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    with PeerCluster(tmp_path_factory.mktemp("plain-quotas"), ids=("1",), http=True) as running:
        with running.config_path.open("a") as config:
            config.write("[quotas]\nrecords_per_s = 0.2\n")
        running.start()
        running.wait_leader()

        async def make() -> None:
            async with RaftClient(running.urls, running.ident) as raw, TopicClient(raw) as c:
                await c.create_topic("orders")

        asyncio.run(make())
        yield running


def send_from(source: str, cluster: PeerCluster, message: Request,
              timeout: float = 2.0) -> list[bytes] | None:
    """One request from source address ``source``; the answer's frames, or None (silence)."""
    host_port = cluster.peers["1"].url.removeprefix("tcp://")
    sock = _CTX.socket(zmq.DEALER)
    sock.connect(f"tcp://{source}:0;{host_port}")
    try:
        rid = new_request_id() if not isinstance(message, RequestUpdate) else None
        sock.send_multipart(encode_request(message, ident=cluster.ident.encode(), id=rid))
        if not sock.poll(int(timeout * 1000)):
            return None
        return sock.recv_multipart()
    finally:
        sock.close(linger=0)


def publish(value: bytes) -> ClientDispatch:
    return ClientDispatch(TYPE_PUBLISH, (encode_records([Record("orders", value)]),))


async def count(cluster: PeerCluster) -> int:
    async with RaftClient(cluster.urls, cluster.ident) as raw, TopicClient(raw) as reader:
        return len((await reader.read("orders", limit=10_000)).records)


def metric(cluster: PeerCluster, name: str) -> str:
    with urllib.request.urlopen(f"{cluster.peers['1'].http_url}/metrics", timeout=10) as page:
        text: str = page.read().decode()
    return "\n".join(line for line in text.splitlines() if line.startswith(name))


async def test_each_source_address_has_its_own_bucket(cluster: PeerCluster) -> None:
    before = await count(cluster)
    first = send_from("127.0.0.3", cluster, publish(b"one"))
    assert first is not None and quota_refusal_of(first) is None
    over = send_from("127.0.0.3", cluster, publish(b"two"))
    assert over is not None
    refusal = quota_refusal_of(over)
    assert refusal is not None and refusal.kind == "publish_rate"
    assert refusal.retry_after_ms > 1000
    other = send_from("127.0.0.2", cluster, publish(b"other address"))
    assert other is not None and quota_refusal_of(other) is None
    # a reference client's "=": no answer it would misread as "not leader", nothing appended
    assert send_from("127.0.0.3", cluster, RequestUpdate(new_request_id(), b"plain")) is None
    async with RaftClient(cluster.urls, cluster.ident) as raw, TopicClient(raw) as ours:
        for n in range(3):  # 127.0.0.1 is the member's own address: never limited
            await ours.publish("orders", b"from the member's host %d" % n, timeout=10)
    assert await count(cluster) == before + 5
    counted = metric(cluster, "raftlog_quota_refusals")
    assert 'principal="address"' in counted and 'kind="publish_rate"' in counted
    assert "127.0.0" not in counted  # addresses never become label values


def test_rest_is_limited_per_address_with_429(cluster: PeerCluster) -> None:
    base = f"{cluster.peers['1'].http_url}/v1/namespaces/default/topics/orders"
    statuses = []
    for path, value in (("publish", "a"), ("publish", "b"), ("store", "in a transaction")):
        request = urllib.request.Request(
            f"{base}/{path}",
            data=json.dumps({"messages": [value], "encoding": "text"}).encode(),
            headers={"Content-Type": "application/json"}, method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                statuses.append((answer.status, None))
        except urllib.error.HTTPError as exc:
            statuses.append((exc.code, exc.headers.get("Retry-After")))
    assert statuses[0] == (200, None)
    assert statuses[1][0] == 429 and int(statuses[1][1] or 0) >= 1
    assert statuses[2][0] == 429  # a transactional store is a publish too
