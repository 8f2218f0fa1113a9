"""One publish of very many small records must not stall the cluster into elections.

Measured on the code before: one ``publish_batch`` of 1.25 million empty records (one
10 MiB entry, within ``max_log_entry_data_size``) was decoded and indexed by every peer in
its loop -- stalls of 1.5-3.8 s, GC pauses of 0.8 s, 13 elections in 10 s, the publish took
7.4 s and the next read 4.7 s. Now the leader counts the records from the entry's array
headers and refuses more than ``max_records_per_entry`` (16,384 by default) with
``TooManyRecords`` before decoding any; a batch at the limit commits, no election happens,
and every peer keeps answering within a second.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from integration.cluster import PeerCluster

from faults.http_load import FLOOD_RAFT, PeerWatch, cluster_terms
from raftlog.errors import TopicError
from raftlog.options import RaftOptions
from raftlog.topics.records import Record
from raftlog.topics.sync_client import SyncTopicClient

pytestmark = pytest.mark.timeout(120)

LIMIT = RaftOptions().max_records_per_entry


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[PeerCluster]:
    with PeerCluster(tmp_path, ident="raftlog-many-records", raft=FLOOD_RAFT,
                     http=True) as running:
        running.start()
        running.wait_stable_leader()
        yield running


def test_an_entry_of_a_million_records_is_refused_before_it_is_decoded(
    cluster: PeerCluster,
) -> None:
    watches = [PeerWatch(cluster, peer_id) for peer_id in cluster.peers]
    with SyncTopicClient(cluster.urls, cluster.ident, timeout=30) as topics:
        topics.create_topic("t")
        terms = cluster_terms(cluster)
        started = time.monotonic()
        with pytest.raises(TopicError, match="TooManyRecords"):
            topics.publish_batch([Record("t", b"")] * 1_250_000)
        refused_in = time.monotonic() - started
        for watch in watches:
            watch.keeps_answering(0.5)
        at_limit = topics.publish_batch([Record("t", b"")] * LIMIT)
        assert len(topics.read("t", limit=10).records) == 10
        for watch in watches:
            watch.keeps_answering(0.5)
        with pytest.raises(TopicError, match="TooManyRecords"):
            topics.publish_batch([Record("t", b"")] * (LIMIT + 1))
    print(f"refused in {refused_in:.2f} s; {LIMIT} records at {at_limit[0]}")
    assert not any(watch.slow for watch in watches), [watch.slow for watch in watches]
    assert cluster_terms(cluster) == terms  # no election
