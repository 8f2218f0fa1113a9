"""REST polls whose clients never read the answer: the peer's memory stays bounded.

Before the send time-out and the answer memory, sixty such polls from one address grew a
peer from 83 to 742 MiB and kept it there (a live client's kernel keeps the connection
open, its window closed, for ever). Here the peer has ``[http] send_timeout_ms`` 2 s and
``[rest] answer_memory_bytes`` 16 MiB, and sixteen connections from four addresses ask
for a 10 MB topic with a tiny receive buffer and never read. The polls queue for the
answer memory; the answers the kernel cannot take are aborted after the time-out, which
lets the next ones in. Meanwhile the peer answers RequestLogInfo within 1 s and
``/healthz`` within 2 s, the answer bytes held stay within the limit, its RSS grows by far
less than the answers asked for, and within ``FLOOD_SECONDS`` nothing is held any more;
afterwards a poll that reads gets its messages, an update commits and no election
happened. Measured: RSS +69-74 MiB, at most 22.5 MB held, all done in ~10 s; with both
limits out of reach +174 MiB and 90 MB still held after 20 s. (Thirty connections against
32 MiB passed alone but once missed the ``/healthz`` bound in a full suite under a CPU
hog: a batch of eight 4 MiB answers built back to back holds the HTTP listener's loop.)

The same with a topic of 1 MiB records of control characters read as ``text`` (each 6 MiB
in JSON): the polls reserved a read's worth and built whatever the records encoded to --
100.7 MB held against the 16 MiB. Now each answer is built within its reservation
(``raftlog.rest.pages``): at most 12.0 MiB held (10.7 for the base64 topic), RSS +18 MiB.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from integration.cluster import PeerCluster
from integration.kafka.helpers import native
from integration.peer.updates import update
from integration.rest.helpers import call
from integration.thread_gang import ThreadGang

from faults.http_load import (
    PeerWatch,
    cluster_terms,
    json_post,
    limited_cluster,
    metric,
    slow_reader,
)
from raftlog.topics.records import Record

pytestmark = pytest.mark.timeout(240)

FLOOD_SECONDS = 40.0
ANSWER_MEMORY = 16 * 1024 * 1024
POLL = "/v1/namespaces/default/topics/{}/poll"
ESCAPED = 1024 * 1024
"""Records of the ``escaped`` topic: 1 MiB of control characters, 6 MiB each as text."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    limits = ("[http]", "send_timeout_ms = 2000", "[rest]",
              f"answer_memory_bytes = {ANSWER_MEMORY}")
    with limited_cluster(tmp_path_factory.mktemp("rest-unread"), "raftlog-unread",
                         limits) as running:
        with native(running) as topics:
            topics.create_topic("big")
            for _ in range(20):  # 10 MB in entries of 500 KB
                topics.publish_batch([Record("big", b"y" * 10_000)
                                      for _ in range(50)])
            topics.create_topic("escaped")
            for _ in range(6):
                topics.publish_batch([Record("escaped", b"\x01" * ESCAPED)])
        yield running


class UnreadPolls(ThreadGang):
    """Connections that each ask for a large poll answer once and never read it."""

    def __init__(self, where: tuple[str, int], sources: list[str], per_source: int,
                 topic: str, encoding: str) -> None:
        super().__init__(self._run, [(source,) for source in sources for _ in range(per_source)])
        self._request = json_post(POLL.format(topic), {"limit": 10_000, "encoding": encoding})
        self._where = where
        self.asked = 0
        self._lock = threading.Lock()

    def _run(self, source: str) -> None:
        with slow_reader(self._where, source, self._request):
            with self._lock:
                self.asked += 1
            self.stopping.wait()  # never reads; closed by the peer or at the end


@pytest.mark.parametrize(("topic", "encoding"), [("big", "base64"), ("escaped", "text")])
def test_unread_poll_answers_are_held_to_the_answer_memory(
    cluster: PeerCluster, topic: str, encoding: str
) -> None:
    leader = cluster.wait_stable_leader()
    watch, terms = PeerWatch(cluster, leader), cluster_terms(cluster)
    http = str(cluster.peers[leader].http_url)
    host, port = http.removeprefix("http://").rsplit(":", 1)
    baseline = peak = watch.rss_mb()
    held: list[float] = []
    sources = [f"127.0.0.{n}" for n in range(2, 6)]
    stalled = metric(http, "raftlog_http_connections_stalled_total")
    with UnreadPolls((host, int(port)), sources, 4, topic, encoding) as polls:
        for _ in range(int(FLOOD_SECONDS / 0.5)):
            watch.keeps_answering(0.5)
            peak = max(peak, watch.rss_mb())
            held.append(metric(http, "raftlog_rest_answer_held_bytes"))
            if (polls.asked == 16 and held[-2:] == [0, 0]
                    and metric(http, "raftlog_http_connections_stalled_total") > stalled):
                break  # every answer taken by the kernel or aborted (twice: no queue left)
    print(f"{topic}: at most {max(held) / 2**20:.1f} MiB held, RSS {baseline:.0f} -> "
          f"{peak:.0f} MiB")
    assert not watch.slow, watch.slow[:10]
    assert polls.asked == 16 and held[-2:] == [0, 0], held
    assert max(held) <= ANSWER_MEMORY, held  # however the payloads encode
    assert peak - baseline < 150, f"RSS {baseline:.0f} -> {peak:.0f} MiB, {polls.asked} asked"
    assert metric(http, "raftlog_http_connections_stalled_total") > stalled
    answer = call(http, "POST", POLL.format(topic), {"limit": 100, "encoding": encoding})
    assert answer.status == 200 and answer.body, answer.body
    assert update(cluster, b"after the flood") > 0
    assert cluster_terms(cluster) == terms  # no election
