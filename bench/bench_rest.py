"""REST API benchmark (issue #18): publish and poll throughput over HTTP/JSON with 16
concurrent keep-alive clients, next to the ZeroMQ ``TopicClient`` doing the same work on
the same cluster; and transactional publishes (store + commit) against plain ones via REST.

- publish: 16 workers, each publishing one 100-byte message per request (REST: one
  keep-alive connection per worker to the leader's listener, base64 bodies; ZeroMQ: 16
  coroutines on one ``TopicClient``); messages/s over ``PUBLISHES`` requests.
- poll: a topic of ``POLL_MESSAGES`` messages read in pages of 100 by 16 workers, each from
  its own offset, from a follower (REST poll vs ``TopicClient.read`` of that follower).
- transactions via REST: 16 workers, each request carrying 10 messages: plain publish vs
  a transaction of one store of 10 + a publish that commits it (two requests, three log
  entries: begin, store, commit).

Everything runs on one machine: the load generator shares the cores with the peers, so the
figures are the cluster plus its clients, not the cluster alone.
"""

from __future__ import annotations

import asyncio
import base64
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

import aiohttp  # noqa: E402
from integration.cluster import PeerCluster, wait_for  # noqa: E402

from raftlog.client import RaftClient  # noqa: E402
from raftlog.topics.client import TopicClient, make_record  # noqa: E402

ROUNDS = int(os.environ.get("RAFTLOG_BENCH_ROUNDS", "3"))
WORKERS = 16
PUBLISHES = int(os.environ.get("RAFTLOG_BENCH_REST_PUBLISHES", "3000"))
POLL_MESSAGES = 20_000
PAGE = 100
TX_REQUESTS = int(os.environ.get("RAFTLOG_BENCH_REST_TX", "600"))
PAYLOAD = b"v" * 100
B64 = base64.b64encode(PAYLOAD).decode()


async def _spread(count: int, job: Callable[[int], Awaitable[int]]) -> float:
    """Run ``job(n)`` for n in range(count) on ``WORKERS`` workers; units done per second."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(count):
        queue.put_nowait(n)
    done = [0]

    async def worker() -> None:
        while not queue.empty():
            done[0] += await job(queue.get_nowait())

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(WORKERS)))
    return done[0] / (time.perf_counter() - t0)


def _session() -> aiohttp.ClientSession:
    # one keep-alive connection per worker
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=WORKERS))


async def _post(session: aiohttp.ClientSession, url: str, body: object) -> object:
    async with session.post(url, json=body) as response:
        if response.status != 200:
            raise RuntimeError(f"{url}: {response.status} {await response.text()}")
        return await response.json()


async def _measure(c: PeerCluster) -> dict[str, float]:
    leader = c.wait_stable_leader()
    follower = next(p for p in c.peers if p != leader)
    lead_http = c.peers[leader].http_url
    follow_http = c.peers[follower].http_url
    follow_url = c.peers[follower].url
    assert lead_http is not None and follow_http is not None
    topics_url = f"{lead_http}/v1/namespaces/default/topics"
    out: dict[str, float] = {}
    async with RaftClient(c.urls, c.ident) as client, TopicClient(client) as tc, \
            _session() as http:
        for name in ("zmq", "rest", "reads", "plain10", "tx10"):
            await tc.create_topic(name)

        async def zmq_publish(_n: int) -> int:
            await tc.publish("zmq", PAYLOAD)
            return 1

        async def rest_publish(_n: int) -> int:
            await _post(http, f"{topics_url}/rest/publish", {"messages": [B64]})
            return 1

        await _spread(200, zmq_publish)  # warm-up
        await _spread(200, rest_publish)
        out["publish_zmq"] = await _spread(PUBLISHES, zmq_publish)
        out["publish_rest"] = await _spread(PUBLISHES, rest_publish)

        for _batch in range(POLL_MESSAGES // 1000):
            await tc.publish_batch([make_record("reads", PAYLOAD) for _ in range(1000)])
        first = (await tc.read("reads", limit=1)).records[0].id.index
        # the reads below go to the follower: wait until it has applied every record
        while len((await tc.read("reads", url=follow_url, from_index=first + POLL_MESSAGES
                                 // 1000 - 1, limit=1)).records) == 0:
            await asyncio.sleep(0.01)
        pages = POLL_MESSAGES // PAGE
        poll_url = f"{follow_http}/v1/namespaces/default/topics/reads/poll"

        async def zmq_poll(n: int) -> int:
            entry = first + (n % pages) * PAGE // 1000  # pages within 1000-record entries
            position = (n % pages) * PAGE % 1000
            got = await tc.read("reads", from_index=entry, from_position=position, limit=PAGE,
                                url=follow_url)
            return len(got.records)

        async def rest_poll(n: int) -> int:
            entry = first + (n % pages) * PAGE // 1000
            position = (n % pages) * PAGE % 1000
            got = await _post(http, poll_url, {"startFrom": f"{entry}-{position}",
                                               "limit": PAGE})
            assert isinstance(got, list)
            return len(got)

        out["poll_zmq"] = await _spread(pages * 2, zmq_poll)
        out["poll_rest"] = await _spread(pages * 2, rest_poll)

        ten = [B64] * 10

        async def plain10(_n: int) -> int:
            await _post(http, f"{topics_url}/plain10/publish", {"messages": ten})
            return 10

        async def tx10(_n: int) -> int:
            stored = await _post(http, f"{topics_url}/tx10/store", {"messages": ten})
            assert isinstance(stored, dict)
            await _post(http, f"{topics_url}/tx10/publish",
                        {"transaction": stored["transaction"]})
            return 10

        out["plain10"] = await _spread(TX_REQUESTS, plain10)
        out["tx10"] = await _spread(TX_REQUESTS, tx10)
    return out


def _one() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, PeerCluster(Path(tmp), http=True) as c:
        c.start()
        c.wait_stable_leader()
        for peer in c.peers.values():
            url = peer.http_url
            assert url is not None
            wait_for("REST", lambda u=url: _ready(u))
        return asyncio.run(_measure(c))


def _ready(url: str) -> bool:
    with urllib.request.urlopen(f"{url}/v1/namespaces", timeout=2) as response:
        return bool(response.status == 200)


def run() -> str:
    """``ROUNDS`` fresh clusters; medians per measure."""
    load_before = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    rounds = []
    for n in range(ROUNDS):
        print(f"   round {n + 1}/{ROUNDS}", flush=True)
        rounds.append(_one())
    load_after = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}

    def runs(key: str) -> str:
        return ", ".join(f"{r[key]:,.0f}" for r in rounds)

    return "\n".join([
        "## REST API (HTTP/JSON) vs the ZeroMQ client",
        "",
        f"Three raftlog peers on loopback, fsync on; {WORKERS} concurrent clients (REST: "
        "aiohttp, one keep-alive connection each; ZeroMQ: 16 coroutines on one "
        f"`TopicClient`); 100-byte messages; medians of {ROUNDS} rounds, a fresh cluster "
        "per round. The load generator runs on the same machine as the peers.",
        "",
        "| measure | REST | ZeroMQ client | REST / ZeroMQ | rounds (REST; ZeroMQ) |",
        "|---|---:|---:|---:|---|",
        f"| publish, 1 message per request, messages/s | {med['publish_rest']:,.0f} | "
        f"{med['publish_zmq']:,.0f} | {med['publish_rest'] / med['publish_zmq']:.2f} | "
        f"{runs('publish_rest')}; {runs('publish_zmq')} |",
        f"| poll from a follower, pages of {PAGE}, messages/s | {med['poll_rest']:,.0f} | "
        f"{med['poll_zmq']:,.0f} | {med['poll_rest'] / med['poll_zmq']:.2f} | "
        f"{runs('poll_rest')}; {runs('poll_zmq')} |",
        "",
        "Transactional vs plain publish via REST (16 clients, 10 messages per transaction or "
        "request):",
        "",
        "| measure | messages/s (median) | rounds |",
        "|---|---:|---|",
        f"| plain publish of 10 (1 request, 1 entry) | {med['plain10']:,.0f} | "
        f"{runs('plain10')} |",
        f"| store 10 + publish (commit) (2 requests; begin, store, commit entries) | "
        f"{med['tx10']:,.0f} | {runs('tx10')} |",
        f"| cost of the transaction | {med['plain10'] / med['tx10']:.2f}x slower | |",
        "",
        f"Load average before: {load_before}; after: {load_after} (1/5/15 min).",
    ])
