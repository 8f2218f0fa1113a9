"""A leader whose ``max_log_entry_data_size`` is larger than a follower's must not make
that follower exit.

Peers 1 and 2 run with a 512 KiB entry limit (the first half of a rolling change that
raises it), peer 3 still with 256 KiB. A 288 KiB record is published: peers 1 and 2 commit
it; peer 3's storage would refuse it. Measured on the code before: peer 3 exited with
``EntryTooLargeError`` as soon as the leader sent it the entry (and again at every restart).
Now peer 3 drops the entry (``raftlog_messages_dropped{reason="entry_too_large"}``, one
``entry_over_limit_dropped`` error line) and steps the rest of the message as a heartbeat,
so it stays up and answers, stays behind at that entry without starting an election --
also when it restarts with the old limit and the first message it gets carries the entry
-- and catches up once restarted with the raised limit.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from integration.cluster import PeerCluster, wait_for

from faults.http_load import PeerWatch, cluster_terms, metric
from raftlog.topics.records import Record
from raftlog.topics.sync_client import SyncTopicClient

pytestmark = pytest.mark.timeout(120)

OLD, NEW = 256 * 1024, 512 * 1024


def _start_with_old_limit(cluster: PeerCluster, peer_id: str) -> None:
    """Start ``peer_id`` reading the old limit; the file then says the new one again (what
    a restart of it reads)."""
    cluster._raft["max_log_entry_data_size"] = OLD
    cluster.write_config()
    cluster.start(peer_id)
    wait_for(f"peer {peer_id} to answer", lambda: cluster.log_info(peer_id) is not None, 20)
    cluster._raft["max_log_entry_data_size"] = NEW
    cluster.write_config()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[PeerCluster]:
    """Peers 1 and 2 on the new limit, one of them leading; peer 3 on the old one."""
    with PeerCluster(tmp_path, ident="raftlog-limit-mismatch",
                     raft={"max_log_entry_data_size": NEW}, http=True) as running:
        running.start("1", "2")
        running.wait_leader()
        _start_with_old_limit(running, "3")
        while running.wait_stable_leader() == "3":  # an election under load: not the premise
            running.terminate("3")
            running.wait_leader(exclude="3")
            _start_with_old_limit(running, "3")
        yield running


def _log_lines(cluster: PeerCluster, peer_id: str, event: str) -> list[str]:
    text = cluster.peers[peer_id].log_path.read_text(errors="replace")
    return [line for line in text.splitlines() if f'"{event}"' in line]


def _candidacies(cluster: PeerCluster) -> list[str]:
    return [line for line in _log_lines(cluster, "3", "role_changed") if "candidate" in line]


def test_a_follower_with_a_smaller_limit_stays_up_and_behind(cluster: PeerCluster) -> None:
    with SyncTopicClient(cluster.urls, cluster.ident, timeout=20) as topics:
        topics.create_topic("big")
        terms = cluster_terms(cluster)
        before = topics.publish("big", b"small")
        large = topics.publish_batch([Record("big", b"L" * (OLD + 32 * 1024))])[0]
        after = topics.publish("big", b"after")  # the cluster goes on with peers 1 and 2
        assert after.index > large.index > before.index
        wait_for("peer 3 to drop the large entry",
                 lambda: _log_lines(cluster, "3", "entry_over_limit_dropped"), 20)
        dropped = 'raftlog_messages_dropped_total{reason="entry_too_large"}'
        wait_for("peer 3 to drop it again (the leader resends)", lambda: metric(
            str(cluster.peers["3"].http_url), dropped) >= 2, 20)
        info = cluster.log_info("3")
        assert info is not None, "peer 3 stopped answering"
        assert info.commit_index < large.index  # behind, not past the entry it could not take
        assert cluster.peers["3"].running
        assert cluster_terms(cluster) == terms  # no election: the leader is heard
        assert len(_log_lines(cluster, "3", "entry_over_limit_dropped")) == 1  # logged once
        # Restarted with the old limit again (a reboot before the change went on): the first
        # message it gets is the entry again, and a restarted peer knows no leader yet --
        # it must learn it from that message, not campaign against it.
        cluster.terminate("3")
        _start_with_old_limit(cluster, "3")
        wait_for("peer 3 to follow the leader again", lambda: (
            (i := cluster.log_info("3")) is not None and i.leader_id is not None), 20)
        watch = PeerWatch(cluster, "3")
        watch.keeps_answering(2.0)  # some ten election time-outs
        assert not watch.slow, watch.slow
        assert not _candidacies(cluster)  # peer 3 never campaigned
        assert cluster_terms(cluster) == terms  # nor anyone else
        cluster.terminate("3")  # the second half of the rolling change
        cluster.start("3")
        wait_for("peer 3 to catch up", lambda: (i := cluster.log_info("3")) is not None
                 and i.commit_index >= after.index, 30)
