"""Fetch requests that ask for gigabytes and never read the answer, at the leader's Kafka
listener: the answers' memory stays bounded and the consumers are still served.

Before the Fetch limits one Fetch naming the same partition 100 times with ``max_bytes``
of 2 GiB made the listener build a 420 MB answer (RSS 93 -> 1,310 MiB, 19.6 s of its
thread), and a client that did not read its answer kept it in memory until its connection
idled out (ten minutes). Here the listener has ``fetch_memory_bytes`` 48 MiB and
``send_timeout_ms`` 3 s; eight connections with a tiny receive buffer send that Fetch, never
read, and reconnect after 10 s, for ``FLOOD_SECONDS``. Meanwhile the peer answers
RequestLogInfo within 1 s and ``/healthz`` within 2 s, its RSS grows by far less than what
was asked for, the answer bytes it holds stay within the limit, and a librdkafka consumer
reads the whole topic; ``/metrics`` shows the deferred reads and the stalled connections.
Measured: RSS +113 MiB with 16 GB asked; with the limits set out of reach (a terabyte, 2 GiB,
eleven days) +1,149 MiB and 1.16 GB of answers held, and the RSS bound fails.
"""

from __future__ import annotations

import datetime
import io
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from integration.cluster import PeerCluster, wait_for
from integration.kafka.helpers import bootstrap, consume_all, native
from integration.kafka.raw import RawKafka
from integration.peer.updates import update
from integration.thread_gang import ThreadGang
from kio.index import load_payload_module
from kio.serial import entity_writer
from kio.static.constants import EntityType

from faults.http_load import PeerWatch, cluster_terms, limited_cluster, metric
from raftlog.kafka.settings import split_kafka_url
from raftlog.topics.records import Record

pytestmark = pytest.mark.timeout(240)

FETCH_MEMORY = 48 * 1024 * 1024
SEND_TIMEOUT_MS = 3000
FLOOD_SECONDS = 12.0
RECORDS = 1000
FETCH_V11 = 1, 11
HANG_UPS = 24


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    limits = ("[kafka]", f"fetch_memory_bytes = {FETCH_MEMORY}",
              f"send_timeout_ms = {SEND_TIMEOUT_MS}")
    with limited_cluster(tmp_path_factory.mktemp("fetch-flood"), "raftlog-fflood", limits,
                         kafka=True) as running:
        with native(running) as topics:
            topics.create_topic("big")
            for _ in range(RECORDS // 50):  # 10 MB in entries of 500 KB
                topics.publish_batch([Record("big", b"y" * 10_000) for _ in range(50)])
        yield running


def _greedy_fetch(offset: int) -> bytes:
    """A Fetch v11 naming big's partition 100 times, each and all up to 2 GiB."""
    mod = load_payload_module(*FETCH_V11, EntityType.request)
    part = mod.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                              log_start_offset=-1, partition_max_bytes=2**31 - 1)
    request = mod.FetchRequest(
        replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=2**31 - 1,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=(mod.FetchTopic(topic="big", partitions=(part,) * 100),),
        forgotten_topics_data=(), rack_id="")
    out = io.BytesIO()
    header = request.__header_schema__
    entity_writer(header)(out, header(request_api_key=FETCH_V11[0],
                                      request_api_version=FETCH_V11[1], correlation_id=1,
                                      client_id="greedy"))
    entity_writer(type(request))(out, request)
    return struct.pack(">i", len(out.getvalue())) + out.getvalue()


def _start_offset(host: str, port: int) -> int:
    with RawKafka(host, port) as k:
        mod = k.module(2, 5)
        answer = k.call(2, 5, "ListOffsetsRequest", replica_id=-1, isolation_level=0,
                        topics=(mod.ListOffsetsTopic(name="big", partitions=(
                            mod.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                     timestamp=-2),)),))
    return int(answer.topics[0].partitions[0].offset)


class GreedyReaders(ThreadGang):
    """Connections that send ``frame``, never read, and reconnect after ``hold`` seconds."""

    def __init__(self, where: tuple[str, int], frame: bytes, connections: int,
                 hold: float) -> None:
        super().__init__(self._run, [()] * connections)
        self._where, self._frame, self._hold = where, frame, hold
        self.sent = 0

    def _run(self) -> None:
        while not self.stopping.is_set():
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            try:
                sock.connect(self._where)
                sock.sendall(self._frame)
                self.sent += 1
                self.stopping.wait(self._hold)
            except OSError:
                self.stopping.wait(0.2)
            finally:
                sock.close()


def test_greedy_fetches_that_are_never_read_are_held_to_the_fetch_memory(
    cluster: PeerCluster,
) -> None:
    leader = cluster.wait_stable_leader()
    watch, terms = PeerWatch(cluster, leader), cluster_terms(cluster)
    http = str(cluster.peers[leader].http_url)
    host, port = split_kafka_url(str(cluster.peers[leader].kafka_url))
    frame = _greedy_fetch(_start_offset(host, port))
    baseline = peak = watch.rss_mb()
    held: list[float] = []
    consumed: list[int] = []
    reader = threading.Thread(target=lambda: consumed.append(len(consume_all(
        {"bootstrap.servers": bootstrap(cluster, leader)}, "big", RECORDS, timeout=90))))
    with GreedyReaders((host, port), frame, 8, SEND_TIMEOUT_MS / 1000 + 7) as greedy:
        reader.start()
        deadline = time.monotonic() + FLOOD_SECONDS
        while time.monotonic() < deadline:
            watch.keeps_answering(0.5)
            peak = max(peak, watch.rss_mb())
            held.append(metric(http, "raftlog_kafka_fetch_held_bytes"))
    reader.join(120)
    assert not watch.slow, watch.slow[:10]
    asked_mb = greedy.sent * 100 * 10  # each asked for the 10 MB topic 100 times
    assert greedy.sent >= 8
    assert peak - baseline < 200, f"RSS {baseline:.0f} -> {peak:.0f} MiB, {asked_mb} MB asked"
    assert max(held) <= FETCH_MEMORY, held
    assert consumed == [RECORDS]  # the consumer read the whole topic meanwhile or after
    assert metric(http, "raftlog_kafka_connections_stalled_total") > 0
    assert metric(http, "raftlog_kafka_fetch_reads_deferred_total") > 0
    assert update(cluster, b"after the flood") > 0
    assert cluster_terms(cluster) == terms  # no election


def test_fetches_whose_clients_hang_up_leave_nothing_behind(cluster: PeerCluster) -> None:
    """Clients that send the greedy Fetch, take the first bytes of its answer and hang up:
    each answer goes with its connection. (The failed write's error, kept by asyncio's drain
    waiter, held the listener's frame -- and the answer -- in a reference cycle until the
    cyclic collector ran, ``raftlog.web.hangups``.)"""
    leader = cluster.wait_stable_leader()
    watch = PeerWatch(cluster, leader)
    http = str(cluster.peers[leader].http_url)
    host, port = split_kafka_url(str(cluster.peers[leader].kafka_url))
    frame = _greedy_fetch(_start_offset(host, port))
    baseline = peak = watch.rss_mb()
    for _ in range(HANG_UPS):
        with socket.create_connection((host, port), timeout=30) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(frame)
            assert sock.recv(4), "no answer"
        peak = max(peak, watch.rss_mb())
    wait_for("the answers' memory to be given back",
             lambda: metric(http, "raftlog_kafka_fetch_held_bytes") == 0, timeout=30)
    watch.keeps_answering(1.0)
    peak = max(peak, watch.rss_mb())
    print(f"RSS {baseline:.0f} -> {peak:.0f} MiB after {HANG_UPS} hung-up Fetches")
    assert not watch.slow, watch.slow[:10]
    assert peak - baseline < 150, f"RSS {baseline:.0f} -> {peak:.0f} MiB"
