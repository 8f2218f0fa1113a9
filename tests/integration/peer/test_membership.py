"""Membership changes end to end: CLIENT-state catch-up, joint consensus, leader removal,
repeated add/remove under a continuous write load (node-zmq-raft issue #27 hangs here), and
what a removed peer does (issue #13 item 5)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from integration.cluster import PeerCluster, wait_for
from integration.peer.updates import Writers, assert_acked_exactly_once, update
from raftlog.client import Peer, SyncRaftClient
from raftlog.errors import ConfigUpdateError


def _peers(cluster: PeerCluster, ids: list[str]) -> list[Peer]:
    return [Peer(i, cluster.peers[i].url) for i in ids]


def _follows(cluster: PeerCluster, peer_id: str, members: list[str]) -> bool:
    cfg = cluster.config_of(peer_id)
    return cfg is not None and [p.id for p in cfg.peers] == members and cfg.leader_id is not None


def test_a_new_peer_catches_up_in_client_state_then_becomes_a_voter(cluster: PeerCluster) -> None:
    last = max(update(cluster, b"early %d" % n) for n in range(300))
    cluster.add_outsider("4")
    cluster.start("4")
    caught = wait_for(
        "peer 4 to download the log before joining",
        lambda: (i := cluster.log_info("4")) is not None and i.last_applied >= last and i,
    )
    assert not caught.is_leader
    cfg = cluster.config_of("4")
    assert cfg is not None and [p.id for p in cfg.peers] == ["1", "2", "3"]
    with SyncRaftClient(cluster.urls[:3], cluster.ident, timeout=30) as client:
        joint = client.config_update(_peers(cluster, ["1", "2", "3", "4"]))
    assert joint > last
    for peer_id in ("1", "2", "3", "4"):
        wait_for(
            f"{peer_id} in C(new)", lambda p=peer_id: _follows(cluster, p, ["1", "2", "3", "4"])
        )
    newer = update(cluster, b"after join")
    wait_for("peer 4 to replicate", lambda: cluster.log_info("4").last_applied >= newer)
    text = cluster.peers["4"].log_path.read_text()
    assert "catch_up_done" in text


def test_removing_the_leader_hands_leadership_to_a_remaining_peer(cluster: PeerCluster) -> None:
    update(cluster, b"x")
    old = cluster.wait_leader()
    rest = [p for p in ("1", "2", "3") if p != old]
    with SyncRaftClient(cluster.urls, cluster.ident, timeout=30) as client:
        client.config_update(_peers(cluster, rest))
    new = wait_for(
        "a leader among the remaining peers", lambda: (lid := _leader_of(cluster, rest)) and lid
    )
    assert new in rest
    index = update(cluster, b"after removal")
    for peer_id in rest:
        wait_for(f"{peer_id} applies", lambda p=peer_id: cluster.log_info(p).last_applied >= index)
    cluster.terminate(old)  # the removed peer can be shut down; the cluster goes on
    update(cluster, b"without the old leader")


def _change(client: SyncRaftClient, peers: list[Peer], timeout: float = 60) -> int:
    """config_update, retried while the previous change's C(new) is not yet committed (the
    client reports "busy" at once instead of queueing changes on top of each other)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return client.config_update(peers)
        except ConfigUpdateError as exc:
            if exc.status != 3 or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _leader_of(cluster: PeerCluster, ids: list[str]) -> str | None:
    for peer_id in ids:
        cfg = cluster.config_of(peer_id)
        if cfg is not None and cfg.is_leader:
            return peer_id
    return None


def test_adding_and_removing_a_fourth_peer_five_times_under_load(cluster: PeerCluster) -> None:
    cluster.add_outsider("4")
    cluster.start("4", extra_args=["--set", "exit_when_removed=false"])  # re-added each round
    with Writers(cluster, 3, timeout=60) as load:
        _five_rounds(cluster, load)
    assert not load.errors, load.errors
    assert len(load.acked) > 20
    assert_acked_exactly_once(cluster, cluster.wait_leader(), load.acked)


def _five_rounds(cluster: PeerCluster, load: Writers) -> None:
    three, four = ["1", "2", "3"], ["1", "2", "3", "4"]
    with SyncRaftClient(cluster.urls[:3], cluster.ident, timeout=60) as client:
        for _round in range(5):
            _change(client, _peers(cluster, four))
            wait_for("peer 4 to follow", lambda: _follows(cluster, "4", four), timeout=60)
            _change(client, _peers(cluster, three))
            wait_for("C(new) without 4", lambda: _follows(cluster, "1", three), timeout=60)
            assert not load.errors, load.errors


def _events(log_path: Path, name: str) -> list[dict[str, object]]:
    out = []
    for line in log_path.read_text().splitlines():
        if line.startswith("{") and f'"{name}"' in line:
            event = json.loads(line)
            if event.get("event") == name:
                out.append(event)
    return out


def _campaigns(log_path: Path) -> int:
    return sum(1 for e in _events(log_path, "role_changed") if e.get("role") == "candidate")


def test_a_removed_peer_says_so_once_and_exits_0(cluster: PeerCluster) -> None:
    update(cluster, b"x")
    leader = cluster.wait_stable_leader()
    victim = next(p for p in ("1", "2", "3") if p != leader)
    rest = [p for p in ("1", "2", "3") if p != victim]
    log_path = cluster.peers[victim].log_path
    campaigns = _campaigns(log_path)  # it may have campaigned at start-up
    with SyncRaftClient(cluster.urls, cluster.ident, timeout=30) as client:
        client.config_update(_peers(cluster, rest))
    process = cluster.peers[victim].process
    assert process is not None
    assert process.wait(30) == 0  # it learnt of its removal and stopped by itself
    cluster.peers[victim].process = None
    removed = _events(log_path, "removed_from_cluster")
    assert len(removed) == 1, log_path.read_text()[-3000:]
    assert _campaigns(log_path) == campaigns
    update(cluster, b"without it")
    for peer_id in rest:
        assert not _events(cluster.peers[peer_id].log_path, "unknown_sender_dropped")


def test_a_removed_peer_can_stay_as_a_non_voting_follower(tmp_path: Path) -> None:
    with PeerCluster(tmp_path) as cluster:
        cluster.start(extra_args=["--set", "exit_when_removed=false"])
        update(cluster, b"x")
        leader = cluster.wait_stable_leader()
        victim = next(p for p in ("1", "2", "3") if p != leader)
        rest = [p for p in ("1", "2", "3") if p != victim]
        log_path = cluster.peers[victim].log_path
        campaigns = _campaigns(log_path)  # it may have campaigned at start-up
        with SyncRaftClient(cluster.urls, cluster.ident, timeout=30) as client:
            client.config_update(_peers(cluster, rest))
        wait_for("the removal to be logged", lambda: _events(log_path, "removed_from_cluster"))
        term = cluster.log_info(leader).term  # type: ignore[union-attr]
        time.sleep(1.5)  # several election timeouts: a voter that heard nothing would campaign
        assert cluster.peers[victim].running and _campaigns(log_path) == campaigns
        assert len(_events(log_path, "removed_from_cluster")) == 1
        assert cluster.log_info(victim).term == term  # type: ignore[union-attr]
        assert update(cluster, b"after") > 0


def test_a_peer_removed_while_down_is_logged_once_per_sender(tmp_path: Path) -> None:
    """A peer that was down during its removal, and whose removal the leader that made it no
    longer tracks (a new leader was elected since), never hears of it and campaigns forever;
    the remaining peers drop its RequestVotes (counted) and say so once, not every few
    seconds. (While the same leader is in office it keeps telling the departed peer, which
    then exits like in the test above.)"""
    with PeerCluster(tmp_path, raft={"rpc_timeout": 10}) as cluster:  # 100 RequestVotes/s
        cluster.start()
        update(cluster, b"x")
        leader = cluster.wait_stable_leader()
        victim = next(p for p in ("1", "2", "3") if p != leader)
        rest = [p for p in ("1", "2", "3") if p != victim]
        cluster.terminate(victim)
        with SyncRaftClient([cluster.peers[p].url for p in rest], cluster.ident, timeout=30) as c:
            c.config_update(_peers(cluster, rest))
        update(cluster, b"two peers")
        cluster.terminate(leader)  # the next leader knows nothing of the departed peer
        cluster.start(leader)
        wait_for("a new leader", lambda: _leader_of(cluster, rest), timeout=60)
        log_path = cluster.peers[victim].log_path
        elected_before = len(_events(log_path, "became_leader"))
        cluster.start(victim)
        wait_for("the stale peer to campaign", lambda: _campaigns(log_path) > 0, timeout=60)
        for peer_id in rest:
            wait_for(
                f"peer {peer_id} to drop the stale RequestVotes",
                lambda p=peer_id: _events(cluster.peers[p].log_path, "unknown_sender_dropped"),
                timeout=60,
            )
        time.sleep(4)  # the stimulus: ~400 more RequestVotes resent to each remaining peer
        for peer_id in rest:
            drops = _events(cluster.peers[peer_id].log_path, "unknown_sender_dropped")
            assert len(drops) == 1, drops
            assert drops[0]["sender"] == victim
        # undisturbed: the departed peer never won a vote, and the two remaining peers still
        # elect among themselves (on a loaded machine they may change leader: issue #33)
        assert len(_events(log_path, "became_leader")) == elected_before
        assert wait_for("a leader among the remaining peers", lambda: _leader_of(cluster, rest))
        assert update(cluster, b"still writable") > 0
