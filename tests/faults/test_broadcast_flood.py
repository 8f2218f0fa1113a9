"""A flood of subscriber connections to a peer's PUB broadcast, past its descriptor limit.

Anyone may subscribe on a plaintext cluster, and nothing capped the PUB's connections: three
processes holding 7,000 ZMTP subscribers each (greeting and READY, as libzmq sees a SUB)
took all 20,000 descriptors of a peer, and its ZeroMQ port stopped answering until the
connections went. Now the PUB's own monitor feeds a connection cap
(``max_subscriber_connections``: an eighth of the descriptors by default) and
``max_connections_per_address``, shedding the oldest connection to make room.

Peer 1 runs with ``RLIMIT_NOFILE`` lowered to ``NOFILE`` and gets ``1.5 * NOFILE``
subscribers from ten addresses. While they last it answers RequestLogInfo within 1 s and
never runs out of descriptors; afterwards an update commits, a new subscriber is admitted and
kept, no election happened, and ``/metrics`` counts the shed connections under
``connections_shed{reason="broadcast_max_connections"}``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import zmq
from integration.cluster import PeerCluster
from integration.peer.updates import update
from integration.rest.helpers import call
from zmq.utils.monitor import parse_monitor_message

from faults.http_load import PeerWatch, cluster_terms, one_limited_peer
from faults.zmtp import RawDealer

pytestmark = pytest.mark.timeout(180)

NOFILE = 400
FLOOD = int(NOFILE * 1.5)
SOURCES = [f"127.0.0.{n}" for n in range(2, 12)]
RAFT = {"election_timeout_min": 1000, "election_timeout_max": 1500}
"""Election time-outs of a few heartbeats more than the defaults: "no election" is asserted
on a shared test machine."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    with one_limited_peer(PeerCluster(tmp_path_factory.mktemp("pub-flood"),
                                      ident="raftlog-pflood", http=True, raft=RAFT),
                          NOFILE) as running:
        yield running


def _subscriber(url: str, n: int) -> RawDealer | None:
    source = SOURCES[n % len(SOURCES)]
    try:
        return RawDealer(url, timeout=1.0, socket_type=b"SUB", source=source)
    except OSError:
        return None


def test_a_subscriber_flood_past_the_descriptor_limit_is_contained(cluster: PeerCluster) -> None:
    watch = PeerWatch(cluster, "1")
    terms = cluster_terms(cluster)
    url = cluster.peers["1"].pub_url
    held: list[RawDealer] = []
    peak_fds = 0
    try:
        for n in range(FLOOD):
            sub = _subscriber(url, n)
            if sub is not None:
                held.append(sub)
            if n % 50 == 0:
                watch.log_info_in_time()
                peak_fds = max(peak_fds, watch.descriptors())
        peak_fds = max(peak_fds, watch.descriptors())
        watch.log_info_in_time()
    finally:
        for sub in held:
            sub.close()
    assert len(held) > NOFILE // 2  # the flood really connected
    assert not watch.slow, watch.slow[:10]
    assert peak_fds < NOFILE  # never out of descriptors
    assert update(cluster, b"after the flood") > 0
    assert cluster_terms(cluster) == terms  # no election
    context = zmq.Context.instance()
    sub = context.socket(zmq.SUB)
    events = sub.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
    try:  # peer 1 may not lead (only the leader publishes): admitted and kept is the point
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.connect(url)
        assert events.poll(10_000), "a subscriber after the flood was not admitted"
        event = parse_monitor_message(events.recv_multipart())["event"]
        assert event == zmq.EVENT_HANDSHAKE_SUCCEEDED
        assert not events.poll(2000), "a subscriber after the flood was shed"
    finally:
        sub.disable_monitor()
        events.close(linger=0)
        sub.close(linger=0)
    metrics = call(str(cluster.peers["1"].http_url), "GET", "/metrics").raw.decode()
    shed = [line for line in metrics.splitlines()
            if line.startswith("raftlog_connections_shed_total")
            and 'reason="broadcast_max_connections"' in line]
    assert shed and float(shed[0].split()[-1]) > 0, shed

