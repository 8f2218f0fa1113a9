"""Emergency tools against real peer processes (issue #33 item 10): leadership transfer and
drain for maintenance. Safety is asserted, not speed: every write acknowledged before a
move is still in the log after it, and the peers agree on one leader."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.cluster import PeerCluster, wait_for
from integration.peer.updates import assert_acked_exactly_once, new_request_id, update

ADMIN = Path(sys.executable).parent / "raftlog-admin"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    with PeerCluster(tmp_path_factory.mktemp("emergency")) as c:
        c.start()
        c.wait_stable_leader(60)
        yield c


def admin(cluster: PeerCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ADMIN), "--config", str(cluster.config_path), "--timeout", "30", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )


def _write(cluster: PeerCluster, acked: dict[bytes, int], n: int) -> None:
    for i in range(n):
        rid = new_request_id()
        acked[rid] = update(cluster, b"before-move-%d" % i, rid, timeout=60)


def test_leader_transfer_to_a_named_peer_moves_leadership_and_keeps_the_log(
    cluster: PeerCluster,
) -> None:
    acked: dict[bytes, int] = {}
    _write(cluster, acked, 5)
    old = cluster.wait_stable_leader(60)
    target = next(p for p in sorted(cluster.peers) if p != old)
    moved = admin(cluster, "leader", "transfer", "--to", target)
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout.strip() in (
        f"leadership moved from peer {old} to peer {target}",
        f"peer {target} already leads",  # a spontaneous election got there first (load)
    )
    wait_for("the target to lead", lambda: cluster.leader() == target, 60)
    _write(cluster, acked, 3)
    assert_acked_exactly_once(cluster, cluster.wait_leader(60), acked)


def test_leader_transfer_without_a_target_picks_another_peer(cluster: PeerCluster) -> None:
    old = cluster.wait_stable_leader(60)
    moved = admin(cluster, "leader", "transfer")
    assert moved.returncode == 0, moved.stderr
    assert f"leadership moved from peer {old} to peer " in moved.stdout
    assert moved.stdout.split()[-1] != old


def test_leader_transfer_to_the_leader_or_a_stranger(cluster: PeerCluster) -> None:
    leader = cluster.wait_stable_leader(60)
    same = admin(cluster, "leader", "transfer", "--to", leader)
    assert same.returncode == 0 and same.stdout.strip() == f"peer {leader} already leads"
    nobody = admin(cluster, "leader", "transfer", "--to", "99")
    assert nobody.returncode == 1 and "not a member" in nobody.stderr


def test_a_drained_leader_hands_off_and_never_leads_until_undrained(
    cluster: PeerCluster,
) -> None:
    acked: dict[bytes, int] = {}
    _write(cluster, acked, 3)
    drained = cluster.wait_stable_leader(60)
    result = admin(cluster, "drain", drained)
    assert result.returncode == 0, result.stderr
    assert f"peer {drained} drained; leadership moved to peer" in result.stdout
    new = wait_for("a new leader", lambda: (lid := cluster.leader()) != drained and lid, 60)
    # a transfer back is refused by the drained peer itself, and its leaderless campaign
    # never starts: kill the new leader and the remaining two elect the third peer
    back = admin(cluster, "leader", "transfer", "--to", drained)
    assert back.returncode == 1 and "this peer is drained" in back.stderr, back.stderr
    cluster.kill(new)
    try:
        third = next(p for p in cluster.peers if p not in (new, drained))
        assert wait_for("the third peer to lead", lambda: cluster.leader() == third, 60)
        assert cluster.leader() != drained
    finally:
        cluster.start(new)
    undo = admin(cluster, "drain", drained, "--undo")
    assert undo.returncode == 0, undo.stderr
    wait_for("peer agreement", lambda: cluster.wait_stable_leader(60), 60)
    _write(cluster, acked, 2)
    assert_acked_exactly_once(cluster, cluster.wait_leader(60), acked)
