"""Three real ``raftlog-peer`` processes on loopback: election, replication, durability."""

from __future__ import annotations

from pathlib import Path

from integration.cluster import PeerCluster, probe, wait_for
from integration.peer.updates import Writers, assert_acked_exactly_once, new_request_id, update
from raftlog.entry import LogEntry
from raftlog.rpc.messages import (
    RequestBroadcastStateUrl,
    RequestBroadcastStateUrlResponse,
    RequestUpdate,
    RequestUpdateResponse,
    UpdateStatus,
)
from raftlog.storage.rocks import open_storage


def test_three_peers_elect_exactly_one_leader_everyone_knows(shared_cluster: PeerCluster) -> None:
    cluster = shared_cluster
    leader = cluster.wait_leader()
    for peer_id in cluster.peers:
        cfg = wait_for(
            f"peer {peer_id} to learn the leader",
            lambda p=peer_id: (c := cluster.config_of(p)) is not None and c.leader_id and c,
        )
        assert cfg.leader_id == leader
        assert cfg.is_leader == (peer_id == leader)
        assert [p.url for p in cfg.peers] == cluster.urls


def test_updates_commit_in_order_and_every_peer_stores_the_same_log(
    cluster: PeerCluster,
) -> None:
    indexes = [update(cluster, b"record %d" % n) for n in range(60)]
    assert indexes == sorted(indexes) and len(set(indexes)) == 60
    last = indexes[-1]
    for peer_id in cluster.peers:
        wait_for(
            f"peer {peer_id} to apply {last}",
            lambda p=peer_id: (i := cluster.log_info(p)) is not None and i.last_applied >= last,
        )
    leader = cluster.wait_leader()
    served = cluster.read_all(leader)
    cluster.stop()
    logs = []
    for peer in cluster.peers.values():
        store, hard, snaps = open_storage(peer.data_dir, read_only=True)
        try:
            logs.append(store.raw_entries(1, store.last_index + 1))
            # the applied index rides on writes, and a clean stop writes what none carried
            assert hard.load().last_applied >= last
        finally:
            store.close(), hard.close(), snaps.close()
    assert logs[0][: len(served)] == [raw for _, raw in served]
    for other in logs[1:]:
        assert other[:last] == logs[0][:last]
    datas = [LogEntry.from_bytes(raw).data for raw in logs[0][:last]]
    assert [d for d in datas if d.startswith(b"record")] == [b"record %d" % n for n in range(60)]


def test_a_retried_request_id_returns_the_first_index_and_appends_nothing(
    shared_cluster: PeerCluster,
) -> None:
    cluster = shared_cluster
    rid = new_request_id()
    first = update(cluster, b"once", rid)
    again = update(cluster, b"once", rid)
    assert again == first
    leader = cluster.wait_leader()
    entries = cluster.read_all(leader)
    assert sum(1 for _, raw in entries if raw[:12] == rid) == 1


def test_a_stale_request_id_is_answered_expired(shared_cluster: PeerCluster) -> None:
    cluster = shared_cluster
    leader = cluster.wait_leader()
    stale = (1_000_000_000).to_bytes(4, "big") + bytes(8)  # 2001: far outside the window
    got = probe(cluster.peers[leader].url, cluster.ident, RequestUpdate(stale, b"x"))
    assert got == [RequestUpdateResponse(stale, UpdateStatus.EXPIRED)]


def test_every_peer_answers_with_its_own_broadcast_url(shared_cluster: PeerCluster) -> None:
    cluster = shared_cluster
    for peer in cluster.peers.values():
        got = probe(peer.url, cluster.ident, RequestBroadcastStateUrl())
        assert got == [RequestBroadcastStateUrlResponse(peer.pub_url)]


def test_kill9_of_the_leader_under_load_loses_no_acknowledged_update(
    cluster: PeerCluster,
) -> None:
    kill_the_leader_under_load(cluster)


def test_kill9_with_the_storage_thread_loses_no_acknowledged_update(tmp_path: Path) -> None:
    """The same with every peer writing on its storage thread (``storage_thread = true``):
    replies and the leader's own count wait for the thread's fsync."""
    with PeerCluster(tmp_path, raft={"storage_thread": True}) as cluster:
        cluster.start()
        cluster.wait_leader()
        kill_the_leader_under_load(cluster)


def kill_the_leader_under_load(cluster: PeerCluster) -> None:
    with Writers(cluster, 4) as load:
        wait_for("40 acknowledged updates", lambda: len(load.acked) >= 40)
        old = cluster.wait_leader()
        cluster.kill(old)
        new = cluster.wait_leader(exclude=old)
        before = len(load.acked)
        wait_for("updates acknowledged by the new leader", lambda: len(load.acked) >= before + 40)
    assert not load.errors, load.errors
    cluster.start(old)
    last = assert_acked_exactly_once(cluster, cluster.wait_leader(), load.acked)
    assert new != old
    wait_for(
        "the restarted peer to catch up",
        lambda: (i := cluster.log_info(old)) is not None and i.last_applied >= last,
    )


def test_sigterm_stops_cleanly_and_a_restarted_peer_resumes_where_it_was(
    cluster: PeerCluster,
) -> None:
    last = max(update(cluster, b"before %d" % n) for n in range(10))
    follower = next(p for p in cluster.peers if p != cluster.wait_leader())
    wait_for("the follower to apply", lambda: cluster.log_info(follower).last_applied >= last)
    assert cluster.terminate(follower) == 0
    cluster.start(follower)
    info = wait_for("the follower to answer again", lambda: cluster.log_info(follower))
    assert info.last_index >= last
    newer = update(cluster, b"after")
    wait_for(
        "the follower to apply new entries",
        lambda: cluster.log_info(follower).last_applied >= newer,
    )
