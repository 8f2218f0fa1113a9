"""Wall-clock steps on one real peer break no promise (issue #24, findings 1 and 2).

Each test reproduces a finding as the issue describes it, on three ``raftlog-peer`` processes
whose wall clocks can be stepped at run time (``faults.wallclock``; monotonic clocks run on):

1. 20 updates; the leader's wall clock steps +9 h for 4 s, then back; the same 20 request ids
   are retried: each keeps its first index and every payload is in the log once. (Before:
   every peer pruned its request-id cache by its own wall clock, so the step wiped it and all
   20 were appended again.)
2. A topic with 10-minute retention holds 50 records and a transaction with a 120-s timeout
   is open; the leader's wall clock steps +1 h for 3 s, then back: all 50 records stay
   readable on every peer, the transaction commits, and the log clock is within a few seconds
   of true time. (Before: every peer expired all 50, the transaction timed out and the log
   clock stayed ~1 h ahead.)
3. The leader's wall clock stays +9 h: updates are still accepted (before: every one was
   refused as expired), and a follower stepped -9 h changes nothing either; ``raftlog-admin
   health`` warns about both hosts.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from integration.cluster import PeerCluster, wait_for
from integration.peer.updates import new_request_id, update

from faults.wallclock import HOUR, WallClocks, require_offset
from raftlog.entry import LogEntry
from raftlog.topics.sync_client import SyncTopicClient

ADMIN = Path(sys.executable).with_name("raftlog-admin")
NEAR_MS = 5_000
"""How close to true time the log clock must be after a step of seconds."""


@pytest.fixture
def stepped(tmp_path: Path) -> Iterator[tuple[PeerCluster, WallClocks]]:
    clocks = WallClocks(tmp_path)
    with PeerCluster(tmp_path) as cluster:
        for peer in cluster.peers.values():
            peer.env.update(clocks.env(peer.id))
        cluster.start()
        yield cluster, clocks


def _payloads(cluster: PeerCluster, leader: str) -> list[bytes]:
    return [LogEntry.from_bytes(raw).data for _, raw in cluster.read_all(leader)]


def test_retries_keep_their_first_index_across_a_9h_step_of_the_leader(
    stepped: tuple[PeerCluster, WallClocks],
) -> None:
    cluster, clocks = stepped
    leader = cluster.wait_stable_leader()
    ids = [new_request_id() for _ in range(20)]
    first = [update(cluster, b"once-%02d" % n, rid) for n, rid in enumerate(ids)]
    clocks.step(leader, 9 * HOUR)
    require_offset(cluster.urls, cluster.ident, cluster.peers[leader].url, 9 * HOUR)
    time.sleep(4)  # the fault's duration: several housekeeping passes of every peer
    clocks.step(leader, 0)
    again = [update(cluster, b"once-%02d" % n, rid) for n, rid in enumerate(ids)]
    assert again == first
    leader = cluster.wait_leader()
    payloads = _payloads(cluster, leader)
    for n in range(20):
        assert payloads.count(b"once-%02d" % n) == 1


def test_records_and_a_transaction_survive_a_1h_step_of_the_leader(
    stepped: tuple[PeerCluster, WallClocks],
) -> None:
    cluster, clocks = stepped
    leader = cluster.wait_stable_leader()
    with SyncTopicClient(cluster.urls, cluster.ident, timeout=15) as topics:
        topics.create_topic("short", retention_ms=10 * 60_000)
        for n in range(50):
            topics.publish("short", b"r%02d" % n)
        tx = topics.begin_transaction(timeout=120)
        tx.publish("short", b"in the transaction")
        clocks.step(leader, HOUR)
        require_offset(cluster.urls, cluster.ident, cluster.peers[leader].url, HOUR)
        time.sleep(3)  # the fault's duration
        clocks.step(leader, 0)
        topics.publish("short", b"after the step")  # stamps the log clock again
        tx.commit()
        true_ms = time.time() * 1000
        expected = [b"r%02d" % n for n in range(50)] + [b"after the step", b"in the transaction"]
        for peer in cluster.peers.values():
            wait_for(
                f"peer {peer.id} to apply the commit",
                lambda url=peer.url: len(topics.read("short", url=url).records) >= 52,
                timeout=15,
            )
            values = [r.record.value for r in topics.read("short", url=peer.url).records]
            assert sorted(values) == sorted(expected), peer.id
            clock_ms = topics.describe("short", url=peer.url).log_clock_ms
            assert abs(clock_ms - true_ms) < NEAR_MS, (peer.id, clock_ms - true_ms)


def test_writes_continue_while_the_leader_is_9h_ahead_and_a_follower_9h_behind(
    stepped: tuple[PeerCluster, WallClocks],
) -> None:
    cluster, clocks = stepped
    leader = cluster.wait_stable_leader()
    follower = next(p for p in cluster.peers if p != leader)
    clocks.step(leader, 9 * HOUR)
    clocks.step(follower, -9 * HOUR)
    require_offset(cluster.urls, cluster.ident, cluster.peers[follower].url, -9 * HOUR)
    indexes = [update(cluster, b"while stepped %d" % n) for n in range(10)]
    assert indexes == sorted(indexes) and len(set(indexes)) == 10
    with SyncTopicClient(cluster.urls, cluster.ident, timeout=15) as topics:
        topics.create_topic("stepped", retention_ms=60_000)
        topics.publish("stepped", b"x")
        for peer in cluster.peers.values():
            # A follower applies what the leader committed once the next AppendEntries or
            # tick tells it the commit index: wait for the record, then read its clock.
            wait_for(
                f"peer {peer.id} to apply the publish",
                lambda url=peer.url: topics.read("stepped", url=url).records,
                timeout=15,
            )
            clock_ms = topics.describe("stepped", url=peer.url).log_clock_ms
            assert abs(clock_ms - time.time() * 1000) < NEAR_MS, peer.id
    health = subprocess.run(
        [str(ADMIN), "--config", str(cluster.config_path), "--timeout", "20", "health"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert health.returncode == 1, health.stdout + health.stderr  # WARNING, not CRITICAL
    assert f"peer {leader} wall clock 32400s ahead" in health.stdout
    assert f"peer {follower} wall clock 32400s behind" in health.stdout
