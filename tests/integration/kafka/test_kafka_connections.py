"""The Kafka listener's connection limits (``[kafka]``: ``first_request_timeout_ms``,
``idle_timeout_ms``, ``max_connections_per_address``), enforced by the connection guard the
HTTP listener uses, on a real peer with short time-outs: a connection that never sends a
request is closed, an idle one is closed (Kafka's ``connections.max.idle.ms``; one whose
client vanished goes with it), a working one stays, and an address at its cap gets its next
connection closed at once while another address is served.

The flood of bare connections these limits exist for is ``tests/faults/test_kafka_flood``.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator

import pytest

from integration.cluster import PeerCluster, wait_for
from integration.kafka.raw import RawKafka
from raftlog.kafka.settings import split_kafka_url

pytestmark = pytest.mark.timeout(120)

FIRST_REQUEST_MS = 500
IDLE_MS = 1500
CLOSE_BOUND = 15.0
"""Seconds a closing may take on a loaded machine (the reaper runs once a second)."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    table = ["[kafka]", "max_connections_per_address = 2",
             f"first_request_timeout_ms = {FIRST_REQUEST_MS}", f"idle_timeout_ms = {IDLE_MS}"]
    with PeerCluster(tmp_path_factory.mktemp("kafka-conns"), ids=("1",), kafka=True,
                     extra_toml=table) as running:
        running.start()
        running.wait_leader()
        yield running


def _address(cluster: PeerCluster) -> tuple[str, int]:
    return split_kafka_url(str(cluster.peers["1"].kafka_url))


def _raw(cluster: PeerCluster, source: str) -> RawKafka:
    return RawKafka(*_address(cluster), source=source)


def _api_versions(k: RawKafka) -> None:
    answer = k.call(18, 3, "ApiVersionsRequest", client_software_name="t",
                    client_software_version="1")
    assert answer.error_code == 0


def _closed(sock: socket.socket) -> bool:
    """Whether the listener closed ``sock`` (the end of the stream, or a reset); never waits
    (a socket with a time-out would wait for data even with ``MSG_DONTWAIT``)."""
    if not select.select([sock], [], [], 0)[0]:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def test_a_connection_that_never_sends_a_request_is_closed(cluster: PeerCluster) -> None:
    started = time.monotonic()
    with socket.create_connection(_address(cluster), source_address=("127.0.0.2", 0)) as bare:
        wait_for("the listener to close a silent connection", lambda: _closed(bare),
                 CLOSE_BOUND)
    assert time.monotonic() - started >= FIRST_REQUEST_MS / 1000


def test_an_idle_connection_is_closed_and_a_working_one_stays(cluster: PeerCluster) -> None:
    with _raw(cluster, "127.0.0.3") as idle, _raw(cluster, "127.0.0.3") as working:
        _api_versions(idle)
        went_idle = time.monotonic()
        while not _closed(idle.sock):
            assert time.monotonic() - went_idle < CLOSE_BOUND, "an idle connection stayed"
            _api_versions(working)  # a request every 0.2 s: never idle for long
            time.sleep(0.2)
        assert time.monotonic() - went_idle >= IDLE_MS / 1000
        _api_versions(working)  # open for as long as it keeps asking


def test_an_address_at_its_cap_gets_its_next_connection_closed(cluster: PeerCluster) -> None:
    with _raw(cluster, "127.0.0.4") as one, _raw(cluster, "127.0.0.4") as two:
        _api_versions(one)
        _api_versions(two)
        with _raw(cluster, "127.0.0.4") as third:
            wait_for("the third connection of an address to be closed",
                     lambda: _closed(third.sock), CLOSE_BOUND)
        with _raw(cluster, "127.0.0.5") as other:
            _api_versions(other)  # another address is served meanwhile
        _api_versions(one)
