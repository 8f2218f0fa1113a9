"""A JoinGroup flood at the leader's Kafka listener: the group coordinator stays bounded.

Kafka group membership is soft state in the leader's memory that clients create. Before the
coordinator had limits, 20 connections sending JoinGroups with 1 MiB of member metadata and
a session timeout of 24 days grew a leader by ~60 MiB/s without end (1,200 members and
1.2 GiB in 20 s; nothing expired them for 24 days).

Here the leader's ``[kafka]`` group limits are tight (16 MiB held, sessions of at most
10 s) and ten connections send such JoinGroups -- half asking for 24 days, half for 5 s --
until 300 (300 MiB of metadata) were answered. While it lasts the leader answers
RequestLogInfo within 1 s and ``/healthz`` within 2 s; its RSS grows by far less than what
was offered; every answer is a join, INVALID_SESSION_TIMEOUT or COORDINATOR_NOT_AVAILABLE;
``/metrics`` shows the held bytes within the limit and the refusals by reason. Afterwards the
flood's members expire and a librdkafka consumer joins a group and gets its partition;
an update commits and no election happened. Measured: RSS +33 MiB with 807 MiB offered;
with the limits off (the coordinator of before) +399 MiB with 608 MiB offered -- every join
kept -- and the held-bytes and RSS bounds fail.
"""

from __future__ import annotations

import datetime
import io
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer
from integration.cluster import PeerCluster, wait_for
from integration.kafka.helpers import bootstrap
from integration.kafka.raw import RawKafka
from integration.peer.updates import update
from integration.thread_gang import ThreadGang
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from faults.http_load import PeerWatch, cluster_terms, limited_cluster, metric
from raftlog.kafka.settings import split_kafka_url

pytestmark = pytest.mark.timeout(240)

HELD_LIMIT = 16 * 1024 * 1024
MAX_SESSION_MS = 10_000
JOINS = 300
META = b"x" * (1 << 20)
JOIN_V5 = 11, 5


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    limits = ("[kafka]", f"max_group_state_bytes = {HELD_LIMIT}",
              f"group_max_session_timeout_ms = {MAX_SESSION_MS}",
              "group_min_session_timeout_ms = 1000")
    with limited_cluster(tmp_path_factory.mktemp("group-flood"), "raftlog-gflood", limits,
                         kafka=True, topics=("jobs",)) as running:
        yield running


GROUP_MARK = "flood-00-000000"
"""The group id a flood frame is encoded with; each request gets a fresh one of the same
length, written over it (a new group: its member is not evicted by the next one's join)."""


def _join_frame(group: str, session: datetime.timedelta) -> bytes:
    """One JoinGroup v5 request, encoded once and sent many times (the flood's CPU stays
    in the peer, not in re-encoding a megabyte per request here)."""
    mod = load_payload_module(*JOIN_V5, EntityType.request)
    request = mod.JoinGroupRequest(
        group_id=group, session_timeout=session, rebalance_timeout=datetime.timedelta(
            seconds=1), member_id="", group_instance_id=None, protocol_type="consumer",
        protocols=(mod.JoinGroupRequestProtocol(name="range", metadata=META),))
    out = io.BytesIO()
    header = request.__header_schema__
    entity_writer(header)(out, header(request_api_key=JOIN_V5[0], request_api_version=JOIN_V5[1],
                                      correlation_id=1, client_id="flood"))
    entity_writer(type(request))(out, request)
    body = out.getvalue()
    return struct.pack(">i", len(body)) + body


class JoinFlood(ThreadGang):
    """Connections sending pre-encoded JoinGroups, each to a new group, until ``total``
    of those asking a valid session were answered; every answer's error code in
    ``errors``."""

    def __init__(self, host: str, port: int, connections: int, total: int) -> None:
        super().__init__(self._run, [(n,) for n in range(connections)], join_timeout=60)
        self._where = host, port
        self._total = total
        self.errors: Counter[int] = Counter()
        self.valid_answered = 0
        self._lock = threading.Lock()
        response = load_payload_module(*JOIN_V5, EntityType.response).JoinGroupResponse
        self._reader = entity_reader(response.__header_schema__), entity_reader(response)

    def answered(self) -> int:
        with self._lock:
            return sum(self.errors.values())

    def _run(self, n: int) -> None:
        valid = n % 2 == 0
        session = datetime.timedelta(seconds=5) if valid else datetime.timedelta(days=24)
        frame = _join_frame(GROUP_MARK, session)
        read_header, read_body = self._reader
        with RawKafka(*self._where) as k:
            k.sock.settimeout(30)
            for i in range(10**6):
                with self._lock:
                    if self.valid_answered >= self._total or self.stopping.is_set():
                        return
                group = f"flood-{n:02d}-{i:06d}".encode()
                k.sock.sendall(frame.replace(GROUP_MARK.encode(), group, 1))
                answer = k.read_frame()
                error = read_body(answer, read_header(answer, 0)[1])[0].error_code
                with self._lock:
                    self.errors[int(error)] += 1
                    self.valid_answered += valid


def _coordinates(host: str, port: int) -> bool:
    """The listener answers group requests as the coordinator (a fresh cluster's listener
    says NOT_COORDINATOR until its view shows its peer leading)."""
    with RawKafka(host, port) as k:
        answer = k.call(12, 3, "HeartbeatRequest", group_id="probe", generation_id=0,
                        member_id="nobody", group_instance_id=None)
    return bool(answer.error_code == ErrorCode.unknown_member_id)


def _assigned(cluster: PeerCluster, group: str) -> bool:
    """A librdkafka consumer joins ``group`` and is assigned jobs' partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": group,
                         "session.timeout.ms": 6000, "enable.auto.commit": False})
    try:
        consumer.subscribe(["jobs"])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not consumer.assignment():
            consumer.poll(0.5)
        return bool(consumer.assignment())
    finally:
        consumer.close()


def test_a_join_group_flood_is_held_to_the_coordinators_limits(cluster: PeerCluster) -> None:
    leader = cluster.wait_stable_leader()
    watch, terms = PeerWatch(cluster, leader), cluster_terms(cluster)
    http = str(cluster.peers[leader].http_url)
    baseline = peak = watch.rss_mb()
    host, port = split_kafka_url(str(cluster.peers[leader].kafka_url))
    wait_for("the leader's listener to coordinate", lambda: _coordinates(host, port))
    with JoinFlood(host, port, 10, JOINS) as flood:
        while flood.valid_answered < JOINS:
            watch.keeps_answering(0.5)
            peak = max(peak, watch.rss_mb())
            assert metric(http, "raftlog_kafka_group_held_bytes") <= HELD_LIMIT
    assert not watch.slow, watch.slow[:10]
    offered_mb = flood.answered() * len(META) / 2**20
    assert peak - baseline < 150, f"RSS {baseline:.0f} -> {peak:.0f} MiB, {offered_mb:.0f} offered"
    expected = {ErrorCode.none, ErrorCode.invalid_session_timeout,
                ErrorCode.coordinator_not_available}
    assert set(flood.errors) <= {int(e) for e in expected}, flood.errors
    assert flood.errors[int(ErrorCode.invalid_session_timeout)] > 0
    assert flood.errors[int(ErrorCode.coordinator_not_available)] > 0
    refused = 'raftlog_kafka_group_joins_refused_total{reason="%s"}'
    assert metric(http, refused % "session_timeout") > 0
    assert metric(http, refused % "max_group_state_bytes") > 0
    # the flood's members expire (sessions of at most 10 s); a real consumer is served again
    wait_for("the flood's members to expire",
             lambda: metric(http, "raftlog_kafka_group_members") == 0, timeout=30)
    assert _assigned(cluster, "after-the-flood")
    assert update(cluster, b"after the flood") > 0
    assert cluster_terms(cluster) == terms  # no election
