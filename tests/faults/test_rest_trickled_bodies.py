"""REST request bodies trickled by clients that never finish them: the peer's memory stays
bounded, and small requests are not held up.

Before ``[rest] body_memory_bytes``, every connection could hold a body of up to
``max_body_bytes`` (4 MiB) in the peer for up to ``[http] body_timeout_ms``, and the
listener admits ``max_connections`` (1,000). Here 48 connections from four addresses each
send all but the last byte of a 4 MiB publish body and start over when answered, against
a peer with 16 MiB of body memory and a body time-out of 3 s. Only bodies larger than
``SMALL_BODY_BYTES`` draw from the budget, so a client publishing ordinary small requests
meanwhile is answered (200 within 5 s). The peer keeps answering RequestLogInfo within 1 s
and ``/healthz`` within 2 s, the body bytes held stay within the limit, its RSS grows by
far less than what the flood sends, and afterwards an update commits and no election
happened.
Measured: RSS 65 -> 93 MiB; with the body memory out of reach 65 -> 282 MiB (192 MiB of
bodies held); before the body memory, 65 -> 1,026 MiB in 20 s (the bytes of every timed-out
body stayed with its error's traceback until the cyclic collector ran).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from integration.cluster import PeerCluster
from integration.peer.updates import update
from integration.rest.helpers import call
from integration.thread_gang import ThreadGang

from faults.http_load import PeerWatch, cluster_terms, limited_cluster, metric
from raftlog.rest.body_memory import SMALL_BODY_BYTES

pytestmark = pytest.mark.timeout(240)

FLOOD_SECONDS = 15.0
BODY_MEMORY = 16 * 1024 * 1024
BODY = 4 * 1024 * 1024
PUBLISH = "/v1/namespaces/default/topics/small/publish"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    limits = ("[http]", "body_timeout_ms = 3000", "[rest]",
              f"body_memory_bytes = {BODY_MEMORY}")
    with limited_cluster(tmp_path_factory.mktemp("rest-trickle"), "raftlog-trickle",
                         limits, topics=("small",)) as running:
        yield running


class TrickledBodies(ThreadGang):
    """Connections that each send a publish's headers and all but the last byte of a 4 MiB
    body, wait until the peer answers or closes, and start over."""

    def __init__(self, where: tuple[str, int], sources: list[str], per_source: int) -> None:
        super().__init__(self._run, [(source,) for source in sources for _ in range(per_source)])
        self._head = (f"POST {PUBLISH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                      f"\r\nContent-Length: {BODY}\r\n\r\n").encode()
        self._body = b"{" + b" " * (BODY - 2)  # one byte short of the length it declared
        self._where = where
        self.sent = 0
        """Bodies sent up to their last byte."""
        self._lock = threading.Lock()

    def _run(self, source: str) -> None:
        while not self.stopping.is_set():
            with socket.socket() as sock:
                sock.settimeout(0.5)
                sock.bind((source, 0))
                try:
                    sock.connect(self._where)
                    sock.sendall(self._head)
                    if self._send(sock):
                        self._wait_answer(sock)
                except OSError:
                    self.stopping.wait(0.1)

    def _send(self, sock: socket.socket) -> bool:
        view = memoryview(self._body)
        while view and not self.stopping.is_set():
            try:
                view = view[sock.send(view[:256 * 1024]):]
            except TimeoutError:
                continue  # the peer does not read this body (yet)
        with self._lock:
            self.sent += not view
        return not view

    def _wait_answer(self, sock: socket.socket) -> None:
        while not self.stopping.is_set():
            try:
                if sock.recv(4096):
                    return  # 408 or 503: start over
                return  # closed
            except TimeoutError:
                continue


def test_trickled_bodies_are_held_to_the_body_memory(cluster: PeerCluster) -> None:
    leader = cluster.wait_stable_leader()
    watch, terms = PeerWatch(cluster, leader), cluster_terms(cluster)
    http = str(cluster.peers[leader].http_url)
    host, port = http.removeprefix("http://").rsplit(":", 1)
    baseline = peak = watch.rss_mb()
    held: list[float] = []
    slow_publishes: list[str] = []

    def publish_small() -> None:
        started = time.monotonic()
        answer = call(http, "POST", PUBLISH, {"messages": ["eA=="]})
        took = time.monotonic() - started
        if answer.status != 200 or took > 5.0:  # counted, it would wait, then 503 Busy
            slow_publishes.append(f"{answer.status} after {took:.2f}s")
        held.append(metric(http, "raftlog_rest_body_held_bytes"))

    sources = [f"127.0.0.{n}" for n in range(2, 6)]
    with TrickledBodies((host, int(port)), sources, 12) as flood:
        deadline = time.monotonic() + FLOOD_SECONDS
        while time.monotonic() < deadline:
            watch.keeps_answering(0.5, publish_small)
            peak = max(peak, watch.rss_mb())
        sent = flood.sent
    assert not watch.slow, watch.slow[:10]
    assert not slow_publishes, slow_publishes[:10]
    assert sent >= 8, f"only {sent} bodies were read up to their last byte"
    assert max(held) <= BODY_MEMORY, held
    assert max(held) >= BODY, held  # the flood did reach the budget
    flooded = sent * BODY / 2**20
    assert peak - baseline < 100, f"RSS {baseline:.0f} -> {peak:.0f} MiB ({flooded:.0f} MiB sent)"
    assert metric(http, "raftlog_rest_body_waits_total") > 0
    assert update(cluster, b"after the flood") > 0
    assert cluster_terms(cluster) == terms  # no election
    assert SMALL_BODY_BYTES < BODY
