"""A flood of bare TCP connections to a peer's Kafka listener, past its descriptor limit.

Before the listener accepted through the connection guard (``raftlog.observability.guard``,
the HTTP listener's), asyncio accepted every connection it could: three processes opening
7,500 connections each took all 20,000 descriptors of a peer, its ZeroMQ port stopped
answering RequestLogInfo, an update could not commit, and its log grew by ~880,000 lines of
"Too many open files" tracebacks in a minute.

Here peer 1 runs with ``RLIMIT_NOFILE`` lowered to ``NOFILE`` (so its Kafka listener admits
an eighth of it) and gets ``1.5 * NOFILE`` connections that never send a byte, from ten
source addresses, for a few seconds. While it lasts the peer answers RequestLogInfo within
1 s and ``/healthz`` within 2 s, never runs out of descriptors, logs a bounded number of
lines and no traceback, and a Kafka client that connects is served (it displaces an idle
flood connection); afterwards an update commits, no election happened, and ``/metrics``
shows the listener's cap and its evictions (``raftlog_kafka_*``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from integration.cluster import PeerCluster, wait_for
from integration.kafka.raw import RawKafka
from integration.peer.updates import update
from integration.rest.helpers import call

from faults.http_load import HalfOpenFlood, PeerWatch, cluster_terms, one_limited_peer
from raftlog.kafka.settings import split_kafka_url

pytestmark = pytest.mark.timeout(180)

NOFILE = 400
FLOOD_SECONDS = 6.0
RAFT = {"election_timeout_min": 1000, "election_timeout_max": 1500}
"""Election time-outs of a few heartbeats more than the defaults: "no election" is asserted
on a shared test machine."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    with one_limited_peer(PeerCluster(tmp_path_factory.mktemp("kafka-flood"),
                                      ident="raftlog-kflood", http=True, kafka=True,
                                      raft=RAFT), NOFILE) as running:
        yield running


def _served(host: str, port: int) -> bool:
    """A Kafka client connecting now gets its ApiVersions answered."""
    try:
        with RawKafka(host, port) as k:
            k.sock.settimeout(5)
            answer = k.call(18, 3, "ApiVersionsRequest", client_software_name="t",
                            client_software_version="1")
    except OSError:
        return False
    return bool(answer.error_code == 0)


def test_a_bare_connection_flood_past_the_descriptor_limit_is_contained(
    cluster: PeerCluster,
) -> None:
    watch = PeerWatch(cluster, "1")
    lines, terms = watch.log_lines(), cluster_terms(cluster)
    host, port = split_kafka_url(str(cluster.peers["1"].kafka_url))
    sources = [f"127.0.0.{n}" for n in range(2, 12)]
    served: list[bool] = []
    with HalfOpenFlood(port, int(NOFILE * 1.5), sources, greeting=b"", trickle=b"") as flood:
        wait_for("the flood to fill the listener", lambda: flood.connects >= NOFILE // 2)
        watch.keeps_answering(FLOOD_SECONDS, lambda: served.append(_served(host, port)))
        churned = flood.connects
    assert churned > NOFILE  # the flood really went past the limit
    assert not watch.slow, watch.slow[:10]
    assert watch.peak_fds < NOFILE  # never out of descriptors
    assert any(served), "no Kafka client was served during the flood"
    logged = watch.log_lines() - lines
    assert logged < 10 + 6 * FLOOD_SECONDS, f"{logged} log lines in {FLOOD_SECONDS}s"
    assert "Traceback" not in cluster.peers["1"].log_path.read_text()
    assert update(cluster, b"after the flood") > 0
    metrics = call(str(cluster.peers["1"].http_url), "GET", "/metrics").raw.decode()
    assert f"raftlog_kafka_connection_cap {NOFILE // 8}.0" in metrics
    evicted = next(line for line in metrics.splitlines()
                   if line.startswith("raftlog_kafka_connections_evicted_total "))
    assert float(evicted.split()[1]) > 0
    assert cluster_terms(cluster) == terms  # no election

