"""Large Kafka request frames that never finish arriving: the frames' memory stays bounded.

Before ``[kafka] request_memory_bytes`` the listener buffered every connection's frame up
to ``max_request_bytes`` (100 MiB): twenty connections each sending a 100 MiB size and 99
MiB of it held **2 GB** of a peer, for as long as they stayed. Here the budget is 32 MiB and
``send_timeout_ms`` 3 s; ten connections send the size of a 20 MiB frame and 19 MiB of it,
then nothing. Only one such frame is read at a time (the others are not read at all), a
trickled frame is dropped after the time-out, the peer answers RequestLogInfo within 1 s
and ``/healthz`` within 2 s, its RSS grows by far less than the 190 MiB sent, and a
librdkafka producer's message is delivered meanwhile. Measured: RSS +23 MiB; with the
budget and the time-out out of reach +192 MiB (every frame buffered) and the test fails.

And small frames (``SMALL_REQUEST_BYTES``) do not count against the budget: with two
unfinished 16 MiB frames filling 32 MiB exactly and send and first-request time-outs of a
minute, a librdkafka producer (ApiVersions, Metadata, Produce: all small) still delivers
within its 15 s message time-out; counted, its requests waited for the trickled frames'
minute (and the test fails).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from integration.cluster import PeerCluster, wait_for
from integration.kafka.helpers import bootstrap
from integration.thread_gang import ThreadGang

from faults.http_load import PeerWatch, cluster_terms, limited_cluster, metric
from raftlog.kafka.context import SMALL_REQUEST_BYTES
from raftlog.kafka.settings import split_kafka_url

pytestmark = pytest.mark.timeout(240)

FRAME = 20 * 1024 * 1024
FLOOD_SECONDS = 8.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    limits = ("[kafka]", "request_memory_bytes = 33554432", "send_timeout_ms = 3000")
    with limited_cluster(tmp_path_factory.mktemp("request-flood"), "raftlog-rflood", limits,
                         kafka=True, topics=("small",)) as running:
        yield running


class UnfinishedFrames(ThreadGang):
    """Connections that send a frame's size and all but its last MiB, then wait."""

    def __init__(self, where: tuple[str, int], connections: int, frame: int = FRAME) -> None:
        super().__init__(self._run, [()] * connections)
        self._where = where
        self._frame = frame

    def _run(self) -> None:
        with socket.create_connection(self._where) as sock:
            sock.settimeout(FLOOD_SECONDS + 5)
            chunk = b"\0" * (1 << 20)
            try:
                sock.sendall(struct.pack(">i", self._frame))
                for _ in range(self._frame // len(chunk) - 1):
                    if self.stopping.is_set():
                        return
                    sock.sendall(chunk)
            except OSError:
                return  # dropped by the peer, or not read before the end
            self.stopping.wait()


def _delivered(cluster: PeerCluster, leader: str, within_ms: int = 30_000) -> bool:
    errors: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap(cluster, leader),
                         "message.timeout.ms": within_ms})
    producer.produce("small", b"through", on_delivery=lambda err, _m: errors.append(err))
    producer.flush(40)
    return errors == [None]


def test_unfinished_large_frames_are_held_to_the_request_memory(cluster: PeerCluster) -> None:
    leader = cluster.wait_stable_leader()
    watch, terms = PeerWatch(cluster, leader), cluster_terms(cluster)
    host, port = split_kafka_url(str(cluster.peers[leader].kafka_url))
    baseline = peak = watch.rss_mb()
    delivered: list[bool] = []
    with UnfinishedFrames((host, port), 10):
        for _ in range(int(FLOOD_SECONDS / 0.5)):
            watch.keeps_answering(0.5)
            peak = max(peak, watch.rss_mb())
            if not delivered:
                delivered.append(_delivered(cluster, leader))
    assert not watch.slow, watch.slow[:10]
    assert delivered == [True]
    assert peak - baseline < 100, f"RSS {baseline:.0f} -> {peak:.0f} MiB"
    assert "kafka_request_too_slow" in cluster.peers[leader].log_path.read_text()
    http = str(cluster.peers[leader].http_url)  # the flood's connections gone: all given back
    wait_for("the frames' memory to be given back",
             lambda: metric(http, "raftlog_kafka_request_held_bytes") == 0, timeout=15)
    assert cluster_terms(cluster) == terms  # no election


@pytest.fixture(scope="module")
def slow_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    limits = ("[kafka]", "request_memory_bytes = 33554432", "send_timeout_ms = 60000",
              "first_request_timeout_ms = 60000")
    with limited_cluster(tmp_path_factory.mktemp("request-full"), "raftlog-rfull", limits,
                         kafka=True, topics=("small",)) as running:
        yield running


def test_small_requests_pass_a_budget_full_of_trickled_frames(slow_cluster: PeerCluster) -> None:
    leader = slow_cluster.wait_stable_leader()
    host, port = split_kafka_url(str(slow_cluster.peers[leader].kafka_url))
    http = str(slow_cluster.peers[leader].http_url)
    half = 16 * 1024 * 1024
    assert half > SMALL_REQUEST_BYTES
    with UnfinishedFrames((host, port), 2, frame=half):
        wait_for("two frames holding the whole budget",
                 lambda: metric(http, "raftlog_kafka_request_held_bytes") == 2 * half,
                 timeout=30)
        assert _delivered(slow_cluster, leader, within_ms=15_000)
        assert metric(http, "raftlog_kafka_request_held_bytes") == 2 * half  # still full


def test_frames_cut_short_leave_nothing_behind(cluster: PeerCluster) -> None:
    """Clients that send most of a large frame and disconnect: each frame's partial bytes go
    with it. (Read through ``asyncio.wait_for`` on Python 3.11, they stayed in a reference
    cycle through the incomplete read's error until the cyclic collector ran: twenty 15 MiB
    partial frames grew the peer by ~300 MiB.)"""
    leader = cluster.wait_stable_leader()
    watch = PeerWatch(cluster, leader)
    host, port = split_kafka_url(str(cluster.peers[leader].kafka_url))
    baseline = peak = watch.rss_mb()
    chunk = b"\0" * (1 << 20)
    for _ in range(20):
        with socket.create_connection((host, port), timeout=10) as sock:
            sock.sendall(struct.pack(">i", 16 * len(chunk)))
            for _ in range(15):
                sock.sendall(chunk)
        peak = max(peak, watch.rss_mb())
    http = str(cluster.peers[leader].http_url)
    wait_for("the frames' memory to be given back",
             lambda: metric(http, "raftlog_kafka_request_held_bytes") == 0, timeout=15)
    peak = max(peak, watch.rss_mb())
    assert peak - baseline < 100, f"RSS {baseline:.0f} -> {peak:.0f} MiB"
