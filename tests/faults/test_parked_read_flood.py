"""A client that sends thousands of topic reads of a large record and never reads the
answers: the peer stops answering it once it leaves ``max_answer_backlog`` unread, and sheds
it (``raftlog.server.answer_backlog``).

Two ways in. Plain reads: one DEALER pipelines ``READS`` ``TR`` reads of a topic holding a
``RECORD``-byte record. Waiting reads: a ``TR`` read with a ``wait`` that finds nothing
parks in the peer (up to ``MAX_PARKED``, 10,000) until a record of its topic is applied;
then every parked read of that topic is read again and answered on the consensus thread --
here one DEALER parks ``READS`` reads on an empty topic and then one such record is
published. Either way the peer keeps answering RequestLogInfo within 1 s and ``/healthz``
within 2 s, its RSS grows by far less than the answers would weigh (4 GB), the client is
shed, an update afterwards commits and no election happens. Measured before the answer
backlog: plain reads grew the leader from 76 to 2,241 MiB; the waiting reads to 3,641 MiB,
and it stopped answering (reading them all took 22 s). Now: +8 MiB, one loop pass of 0.45 s
with 64 MiB of woken answers a pass (``WAKE_BUDGET`` is 8 MiB).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from integration.cluster import PeerCluster
from integration.kafka.helpers import native
from integration.peer.updates import update

from faults.http_load import PeerWatch, cluster_terms, limited_cluster, metric
from raftlog.topics.records import Record

pytestmark = pytest.mark.timeout(240)

READS = 2000
RECORD = 2 * 1024 * 1024

SILENT_READER = """
import sys, zmq
from raftlog.rpc.messages import ClientDispatch
from raftlog.rpc.request_encoders import encode_request
from raftlog.topics import wire
url, ident, n = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
sock = zmq.Context().socket(zmq.DEALER)
sock.setsockopt(zmq.LINGER, 0)
sock.setsockopt(zmq.RCVHWM, 10)
sock.setsockopt(zmq.SNDHWM, 0)
sock.connect(url)
topic, wait = sys.argv[4], int(sys.argv[5])
args = tuple(wire.encode_read_request(wire.ReadRequest(topic, wait_ms=wait)))
for i in range(n):
    sock.send_multipart(encode_request(ClientDispatch(wire.TYPE_READ, args), ident=ident,
                                       id=i.to_bytes(4, "big")))
print("sent", flush=True)
sys.stdin.read()  # until the test closes our stdin; the answers are never read
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    with limited_cluster(tmp_path_factory.mktemp("parked"), "raftlog-parked", ()) as running:
        with native(running) as topics:
            topics.create_topic("quiet")
            topics.create_topic("large")
            topics.publish_batch([Record("large", b"r" * RECORD)])
        yield running


@contextlib.contextmanager
def silent_reader(cluster: PeerCluster, leader: str, topic: str, wait_ms: int) -> Iterator[None]:
    """A process whose one DEALER has sent ``READS`` reads of ``topic`` and reads nothing."""
    process = subprocess.Popen(
        [sys.executable, "-c", SILENT_READER, cluster.peers[leader].url, cluster.ident,
         str(READS), topic, str(wait_ms)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "sent"
        yield
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(20)


def _shed(cluster: PeerCluster, leader: str) -> float:
    try:  # the labelled series exists from the first shed on
        return metric(str(cluster.peers[leader].http_url),
                      'raftlog_connections_shed_total{reason="answer_backlog"}')
    except StopIteration:
        return 0.0


@pytest.mark.parametrize("wait_ms", [0, 30_000], ids=["plain", "waiting"])
def test_a_client_that_reads_no_answers_is_shed(cluster: PeerCluster, wait_ms: int) -> None:
    leader = cluster.wait_stable_leader()
    watch, terms = PeerWatch(cluster, leader), cluster_terms(cluster)
    shed_before = _shed(cluster, leader)
    baseline = peak = watch.rss_mb()
    with silent_reader(cluster, leader, "quiet" if wait_ms else "large", wait_ms):
        if wait_ms:  # the reads were sent before "sent"; one more request is behind them
            assert watch.log_info_in_time()
            with native(cluster) as topics:
                topics.publish_batch([Record("quiet", b"r" * RECORD)])
        deadline = time.monotonic() + 60
        while _shed(cluster, leader) == shed_before:
            assert time.monotonic() < deadline, "the silent client was not shed"
            watch.keeps_answering(0.2)
            peak = max(peak, watch.rss_mb())
        for _ in range(4):
            watch.keeps_answering(0.5)
            peak = max(peak, watch.rss_mb())
    assert not watch.slow, watch.slow[:10]
    assert peak - baseline < 300, f"RSS {baseline:.0f} -> {peak:.0f} MiB"
    assert update(cluster, b"after the silent reader") > 0
    assert cluster_terms(cluster) == terms  # no election
