"""Quotas per principal on a real CURVE peer (issue #25, item 2): two keys with different
quotas (the limited one is refused with the typed error past its rate while the other keeps
publishing), a REST token answered 429 with Retry-After, the streams and long-poll caps,
and an allowlist reload by SIGHUP that changes a quota. One peer: quotas are enforced by the
peer a request reaches, and one peer keeps the module well under a minute."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import zmq

from integration.cluster import PeerCluster
from integration.secure_setup import ClientSpec, SecureSetup
from integration.security.test_secure_cluster import raw_exchange
from raftlog import sockets
from raftlog.client import RaftClient
from raftlog.errors import QuotaExceededError
from raftlog.rpc.denied import quota_refusal_of
from raftlog.rpc.messages import RequestEntries, RequestLogInfo
from raftlog.rpc.request_encoders import encode_request
from raftlog.security.policy import token_digest
from raftlog.topics.client import TopicClient

pytestmark = pytest.mark.timeout(120)
_CTX = zmq.Context.instance()

TOKEN = "rest-token-of-resty"
ALLOWLIST = """
[quotas.writer]
records_per_s = 0.2

[[clients]]
name = "admin"
role = "admin"

[[clients]]
name = "slow"
role = "writer"

[[clients]]
name = "fast"
role = "writer"
quota = {{ records_per_s = 100000, bytes_per_s = 1e9 }}

[[clients]]
name = "patient"
role = "writer"
quota = {{ records_per_s = 20 }}

[[clients]]
name = "streamer"
role = "reader"
quota = {{ streams = 1 }}

[[clients]]
name = "conny"
role = "reader"
quota = {{ connections = 2 }}

[[clients]]
name = "resty"
role = "writer"
key = "resty"
token_sha256 = "{digest}"
quota = {{ waiting_reads = 1 }}
"""


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> SecureSetup:
    names = ["admin", "slow", "fast", "patient", "streamer", "conny", "resty"]
    setup = SecureSetup(tmp_path_factory.mktemp("quota-keys"), peer_ids=("1",),
                        clients=[ClientSpec(n, "writer") for n in names])
    setup.clients_file.write_text(ALLOWLIST.format(digest=token_digest(TOKEN)))
    return setup


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, secure: SecureSetup) -> Iterator[
    PeerCluster
]:
    with PeerCluster(tmp_path_factory.mktemp("quotas"), ids=("1",), security=secure,
                     http=True) as running:
        running.start()
        running.wait_leader()

        async def make() -> None:
            async with client(running, secure, "admin") as raw, TopicClient(raw) as admin:
                await admin.create_topic("orders")

        asyncio.run(make())
        yield running


def client(cluster: PeerCluster, secure: SecureSetup, name: str,
           timeout: float = 20) -> RaftClient:
    return RaftClient(cluster.urls, cluster.ident, curve=secure.client(name), timeout=timeout)


async def count(cluster: PeerCluster, secure: SecureSetup) -> int:
    async with client(cluster, secure, "admin") as raw, TopicClient(raw) as admin:
        return len((await admin.read("orders", limit=10_000)).records)


async def test_limited_key_is_refused_past_its_rate_while_another_publishes_freely(
    cluster: PeerCluster, secure: SecureSetup
) -> None:
    before = await count(cluster, secure)
    async with client(cluster, secure, "slow") as raw, TopicClient(raw) as slow:
        await slow.publish("orders", b"within the burst", timeout=10)
        with pytest.raises(QuotaExceededError) as refused:  # the next one is 5 s away
            await slow.publish("orders", b"over", timeout=2)
        assert refused.value.kind == "publish_rate"
        assert 1.0 < refused.value.retry_after <= 5.0
        async with client(cluster, secure, "fast") as raw_fast, TopicClient(raw_fast) as fast:
            for n in range(100):  # the other key: never refused, never waits
                await fast.publish("orders", b"%d" % n, timeout=10)
        with pytest.raises(QuotaExceededError):  # still limited: its own bucket
            await slow.publish("orders", b"over again", timeout=2)
    assert await count(cluster, secure) == before + 101  # the refused were never appended


async def test_client_waits_out_the_retry_after_by_itself(
    cluster: PeerCluster, secure: SecureSetup
) -> None:
    async with client(cluster, secure, "patient") as raw, TopicClient(raw) as patient:
        started = time.monotonic()
        for n in range(30):  # 20 in the burst, then 20/s: the client waits as told
            await patient.publish("orders", b"p%d" % n, timeout=20)
        assert time.monotonic() - started >= 0.4  # 10 past the burst at 20/s


async def test_streams_over_the_cap_get_the_typed_refusal(
    cluster: PeerCluster, secure: SecureSetup
) -> None:
    async with client(cluster, secure, "admin") as raw, TopicClient(raw) as admin:
        # more than one batch (128 KiB): the stream stays open, waiting for its ack
        first_big = await admin.publish("orders", b"x" * 60_000)
        for _ in range(3):
            await admin.publish("orders", b"x" * 60_000)
    url = cluster.peers["1"].url
    streamer = secure.client("streamer")
    stream = RequestEntries(first_big.index - 1, 10_000)
    first = raw_exchange(url, cluster.ident, stream, streamer)
    assert first is not None and quota_refusal_of(first) is None  # a stream opened
    second = raw_exchange(url, cluster.ident, stream, streamer)
    assert second is not None
    refusal = quota_refusal_of(second)
    assert refusal is not None and refusal.kind == "streams"
    other = raw_exchange(url, cluster.ident, stream, secure.admin)
    assert other is not None and quota_refusal_of(other) is None


def _rest(cluster: PeerCluster, path: str, body: object, token: str = TOKEN,
          timeout: float = 30) -> tuple[int, dict[str, str], object]:
    base = cluster.peers["1"].http_url
    request = urllib.request.Request(
        f"{base}/v1/namespaces/default/topics/orders/{path}", data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, dict(answer.headers), json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


def test_rest_token_gets_429_with_retry_after(cluster: PeerCluster) -> None:
    status, _, _ = _rest(cluster, "publish", {"messages": ["a"], "encoding": "text"})
    assert status == 200  # the writer role's default: 0.2/s, the burst admits one
    status, headers, body = _rest(cluster, "publish", {"messages": ["b"], "encoding": "text"})
    assert status == 429
    assert isinstance(body, dict) and body["error"] == "QuotaExceeded"
    assert 1 <= int(headers["Retry-After"]) <= 5


def test_rest_long_polls_over_the_cap_get_429(cluster: PeerCluster) -> None:
    """Two long polls of one token at once: whichever comes second is refused."""
    far = {"startFrom": 4_102_444_800_000, "waitMs": 8000}  # year 2100: nothing yet
    with ThreadPoolExecutor(1) as pool:
        holding = pool.submit(_rest, cluster, "poll", far)
        refused = None
        deadline = time.monotonic() + 8
        while refused is None and time.monotonic() < deadline:
            if holding.done():
                status, headers, _ = holding.result()
                if status == 429:  # the short poll below held the slot at that moment
                    refused = headers
                    break
                holding = pool.submit(_rest, cluster, "poll", far)
            status, headers, _ = _rest(cluster, "poll", {**far, "waitMs": 50})
            if status == 429:
                refused = headers
        assert refused is not None, "a second long poll of the same token was not refused"
        assert int(refused["Retry-After"]) >= 1


async def test_sighup_reload_applies_new_quotas(cluster: PeerCluster, secure: SecureSetup,
                                                tmp_path: Path) -> None:
    async with client(cluster, secure, "slow") as raw, TopicClient(raw) as slow:
        with pytest.raises(QuotaExceededError):  # its bucket is in debt from the tests above
            for _ in range(2):
                await slow.publish("orders", b"x", timeout=1)
        text = secure.clients_file.read_text().replace(
            "[quotas.writer]\nrecords_per_s = 0.2", "[quotas.writer]\nrecords_per_s = 1000"
        )
        secure.clients_file.write_text(text)
        cluster.peers["1"].process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 15
        while True:  # the reload runs between two passes of the peer's loop
            try:
                for _ in range(5):
                    await slow.publish("orders", b"after reload", timeout=1)
                break
            except QuotaExceededError:
                assert time.monotonic() < deadline, "SIGHUP did not apply the new quota"
                await asyncio.sleep(0.1)


def test_connections_over_the_cap_are_shed(cluster: PeerCluster, secure: SecureSetup) -> None:
    url = cluster.peers["1"].url
    conny = secure.client("conny")
    held = [sockets.client_dealer(_CTX, url, curve=conny) for _ in range(2)]
    try:
        for n, sock in enumerate(held):  # two connections that talk: both served
            assert ask(sock, cluster, n) is not None
        third = raw_exchange(url, cluster.ident, RequestLogInfo(), conny)
        assert third is None or quota_refusal_of(third) is not None  # shed (answer or not)
        held.pop().close(linger=0)  # one ends: room for another, once the peer saw it end
        deadline = time.monotonic() + 15
        while True:
            answer = raw_exchange(url, cluster.ident, RequestLogInfo(), conny)
            if answer is not None and quota_refusal_of(answer) is None:
                break
            assert time.monotonic() < deadline, "a connection that ended still counts"
    finally:
        for sock in held:
            sock.close(linger=0)


def ask(sock: zmq.Socket[bytes], cluster: PeerCluster, n: int) -> list[bytes] | None:
    sock.send_multipart(encode_request(RequestLogInfo(), ident=cluster.ident.encode(),
                                       id=b"c%d" % n))
    if not sock.poll(5000):
        return None
    answer = sock.recv_multipart()
    assert quota_refusal_of(answer) is None
    return answer
