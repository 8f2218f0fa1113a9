"""The fault proxy tells links apart and its faults do what they say, on a real cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from integration.cluster import wait_for

from faults.cluster import FaultCluster
from faults.network import CLIENT
from faults.workload import Workload, WorkloadSpec


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FaultCluster]:
    with FaultCluster(tmp_path) as c:
        c.start()
        c.peers.wait_stable_leader(30)
        yield c


def passed(c: FaultCluster, src: str, dst: str) -> int:
    return int(c.net.stats()["passed"].get(f"{src}->{dst}", 0))


def test_links_are_identified_per_peer(cluster: FaultCluster) -> None:
    wait_for(
        "connections between all peers",
        lambda: len([c for c in cluster.net.stats()["connections"] if CLIENT not in c]) >= 6,
    )
    conns = set(cluster.net.stats()["connections"])
    for a in cluster.ids:
        for b in cluster.ids:
            if a != b:
                assert f"{a}->{b}" in conns


def test_one_way_link_is_really_one_way(cluster: FaultCluster) -> None:
    """Leader -> follower keeps flowing, follower -> leader is dropped entirely. (Whether
    the follower makes progress on such a link is the protocol's business: a stop-and-wait
    leader only re-sends the request it got no answer to.)"""
    leader = cluster.wait_leader()
    follower = next(p for p in cluster.ids if p != leader)
    workload = Workload(cluster.urls, "raftlog-faults", WorkloadSpec(writers=1, publishers=0))
    workload.start()
    try:
        wait_for("acks", lambda: workload.acked() >= 5)
        cluster.net.one_way(follower, leader)
        sent_back = passed(cluster, follower, leader)
        heard = passed(cluster, leader, follower)
        wait_for(
            "leader -> follower messages", lambda: passed(cluster, leader, follower) > heard + 5
        )
        assert passed(cluster, follower, leader) == sent_back
        assert cluster.net.dropped(follower, leader) > 0
    finally:
        cluster.net.heal()
        workload.stop()


def test_partition_isolates_and_heal_restores(cluster: FaultCluster) -> None:
    leader = cluster.wait_leader()
    others = [p for p in cluster.ids if p != leader]
    cluster.net.partition([leader], others)
    new_leader = cluster.wait_leader(exclude=leader)
    assert new_leader in others
    cluster.net.heal()
    cluster.wait_converged()
