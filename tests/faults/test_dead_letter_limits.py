"""One consumer's nack of one near-limit record must not take the cluster down.

A queue group with a dead-letter topic and ``max_deliveries`` 1; a record as large as its
own entry allows (``max_log_entry_data_size``, 256 KiB here) and a small one; a member
leases both and nacks them. The leader copies dead records into the dead-letter topic with
headers of their own, so the large one's copy no longer fits an entry.

Measured on the code before: the leader appended the copy unchecked, its storage refused
it (``EntryTooLargeError``) and the peer exited; the next leader proposed the same copy
and exited too -- all three peers down within seconds, and again at every restart. Now the
copy goes without its value (``raftlog-dlq-omitted: value``; the original is at
``raftlog-dlq-topic``/``-id``), both records reach the dead-letter topic once, every peer
keeps running and the cluster keeps committing (``raftlog.topics.groups.deadletter``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from integration.cluster import PeerCluster, wait_for

from raftlog.errors import TopicError
from raftlog.topics.records import Record, encode_records
from raftlog.topics.sync_client import SyncTopicClient

pytestmark = pytest.mark.timeout(120)

LIMIT = 256 * 1024


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[PeerCluster]:
    with PeerCluster(tmp_path, ident="raftlog-dlq-limits",
                     raft={"max_log_entry_data_size": LIMIT}) as running:
        running.start()
        running.wait_stable_leader()
        yield running


def _largest_record(topics: SyncTopicClient) -> Record:
    """The largest record of topic ``jobs`` whose own entry the cluster accepts."""
    size = LIMIT
    while len(encode_records([Record("jobs", b"v" * size)])) > LIMIT:
        size -= 1
    with pytest.raises(TopicError, match="EntryTooLarge"):  # the limit is where we think
        topics.publish_batch([Record("jobs", b"v" * (size + 1))])
    return Record("jobs", b"v" * size)


def test_a_dead_record_as_large_as_its_entry_reaches_the_dead_letter_topic(
    cluster: PeerCluster,
) -> None:
    with SyncTopicClient(cluster.urls, cluster.ident, timeout=20) as topics:
        topics.create_topic("jobs")
        large = _largest_record(topics)
        big_id = topics.publish_batch([large])[0]
        small_id = topics.publish("jobs", b"small")
        topics.create_group("workers", mode="queue", topics=["jobs"], ack_wait_ms=60_000,
                            max_deliveries=1, dead_letter="jobs.dlq")
        leased = topics.lease("workers", "m1", 10)
        assert {x.id for x in leased} == {big_id, small_id}
        topics.nack("workers", "m1", [(x.topic, x.id) for x in leased], reason="poison")
        wait_for("both records dead-lettered",
                 lambda: topics.describe_group("workers").stats.dead_lettered == 2, 30)
        copies = {r.record.headers["raftlog-dlq-id"]: r.record
                  for r in topics.read("jobs.dlq").records}
        assert len(topics.read("jobs.dlq").records) == 2  # each once
        slim = copies[f"{big_id.index}:{big_id.position}".encode()]
        whole = copies[f"{small_id.index}:{small_id.position}".encode()]
        assert slim.value == b"" and slim.headers["raftlog-dlq-omitted"] == b"value"
        assert whole.value == b"small" and "raftlog-dlq-omitted" not in whole.headers
        assert all(peer.process is not None and peer.process.poll() is None
                   for peer in cluster.peers.values()), "a peer exited"
        assert topics.publish("jobs", b"after").index > small_id.index  # still committing
