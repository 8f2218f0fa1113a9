"""Harness self-tests: the reference cluster and the reference client work on this machine.

Why: later interop tests put raftlog peers and clients next to the reference; when one of
them fails we must know the harness itself (install, config, process control, client
scripts, leader detection) is sound. These tests use only reference software.
"""

from __future__ import annotations

import time

import pytest
from reference import (
    ReferenceCluster,
    agreed_leader,
    iter_state_data,
    js_config_and_log_info,
    js_idempotent_retry,
    js_read_log,
    js_subscribe,
    js_updates,
    wait_until,
)

pytestmark = pytest.mark.timeout(120)


def test_three_peers_elect_one_leader(reference_cluster: ReferenceCluster) -> None:
    cluster = reference_cluster
    replies = cluster.probe()
    assert all(r is not None for r in replies.values()), replies
    leader = agreed_leader(replies, 3)
    assert leader in cluster.ids
    assert [pid for pid, r in replies.items() if r and r.is_leader] == [leader]
    for r in replies.values():
        assert r is not None
        assert r.leader_id == leader
        assert r.peers == cluster.peers  # frame 4: the whole config, responder included

    res = js_config_and_log_info(cluster.urls, cluster.ident).run()
    assert res["isLeader"] is True
    assert res["leaderId"] == leader
    assert [tuple(p) for p in res["peers"]] == cluster.peers
    info = res["logInfo"]
    assert info["isLeader"] is True and info["leaderId"] == leader
    assert info["currentTerm"] >= 1
    # A fresh reference log is empty: the new leader appends no checkpoint entry.
    assert (info["firstIndex"], info["lastIndex"], info["commitIndex"]) == (1, 0, 0)
    assert info["snapshotSize"] == 0


def test_reference_client_commits_updates_in_order(reference_cluster: ReferenceCluster) -> None:
    cluster = reference_cluster
    res = js_updates(cluster.urls, cluster.ident, 20).run()
    indexes = res["indexes"]
    assert len(indexes) == 20
    assert indexes == sorted(set(indexes)), indexes  # strictly increasing
    assert indexes[0] >= 1
    assert len(set(res["reqids"])) == 20

    # Many in flight at once: every update gets its own index after the sequential ones.
    conc = js_updates(
        cluster.urls, cluster.ident, [b"c%d" % i for i in range(16)], concurrent=True
    ).run()
    assert len(set(conc["indexes"])) == 16
    assert min(conc["indexes"]) > indexes[-1]

    info = js_config_and_log_info(cluster.urls, cluster.ident).run()["logInfo"]
    assert info["commitIndex"] >= max(conc["indexes"])
    assert info["lastApplied"] >= max(conc["indexes"])


def test_idempotent_retry_returns_the_same_index(reference_cluster: ReferenceCluster) -> None:
    cluster = reference_cluster
    js_updates(cluster.urls, cluster.ident, 3).run()
    res = js_idempotent_retry(cluster.urls, cluster.ident, payload=b"only-once").run()
    assert res["first"] == res["second"] == res["third"], res

    log = js_read_log(cluster.urls, cluster.ident).run()
    same = [e for e in log["entries"] if e["reqid"] == res["reqid"]]
    assert len(same) == 1, same
    assert same[0]["index"] == res["first"]
    assert bytes.fromhex(same[0]["data"]) == b"only-once"  # the retry's data is not stored


def test_request_entries_reads_back_the_log(reference_cluster: ReferenceCluster) -> None:
    cluster = reference_cluster
    # Small entries plus 40 KB ones, so the leader must split the stream into several batches
    # (<= 64 KiB each) and the client must acknowledge the pipelined responses.
    payloads = [b"small-%d" % i for i in range(20)] + [bytes([i]) * 40_000 for i in range(5)]
    written = js_updates(cluster.urls, cluster.ident, payloads).run()["indexes"]

    log = js_read_log(cluster.urls, cluster.ident).run()
    assert log["complete"] is True
    assert log["snapshots"] == []
    assert log["firstIndex"] == 1
    assert log["count"] == log["lastIndex"] >= written[-1]
    assert [e["index"] for e in log["entries"]] == list(range(1, log["count"] + 1))
    assert log["batches"] > 1
    data = dict(iter_state_data(log["entries"]))
    assert [data[i] for i in written] == payloads
    assert all(e["term"] >= 1 for e in log["entries"])

    part = js_read_log(cluster.urls, cluster.ident, prev_index=5, count=7).run()
    assert [e["index"] for e in part["entries"]] == list(range(6, 13))
    assert part["complete"] is True


def test_subscriber_streams_entries(reference_cluster: ReferenceCluster) -> None:
    cluster = reference_cluster
    before = [b"before-%d" % i for i in range(5)]
    js_updates(cluster.urls, cluster.ident, before).run()
    # Catch up on the 5 existing entries (RequestEntries) and receive 3 written through the
    # subscriber itself (RequestUpdate + StateBroadcast).
    after = [b"after-%d" % i for i in range(3)]
    res = js_subscribe(cluster.urls, cluster.ident, 8, writes=after).run()
    assert [e["index"] for e in res["entries"]] == list(range(1, 9))
    got = [bytes.fromhex(e["data"]) for e in res["entries"]]
    assert got[:5] == before
    assert sorted(got[5:]) == sorted(after)
    assert res["pubUrl"] in cluster.pub_urls.values()


def test_kill_leader_elects_a_new_one(reference_cluster: ReferenceCluster) -> None:
    cluster = reference_cluster
    first = js_updates(cluster.urls, cluster.ident, 5).run()["indexes"]
    old = cluster.wait_for_leader()

    cluster.kill(old)  # SIGKILL
    t0 = time.monotonic()
    new = cluster.wait_for_leader(timeout=10, exclude={old})
    elapsed = time.monotonic() - t0
    assert new != old
    assert not cluster.is_running(old)
    print(f"new leader {new} elected {elapsed * 1000:.0f} ms after kill -9 of {old}")

    # The reference client finds the new leader (the dead peer just times out) and commits.
    more = js_updates(cluster.urls, cluster.ident, 3).run()["indexes"]
    assert min(more) > max(first)
    log = js_read_log(cluster.urls, cluster.ident).run()
    assert {e["index"] for e in log["entries"]} >= set(first) | set(more)

    # The killed peer restarts from its data dir and follows the (current) leader.
    cluster.start(old)

    def rejoined() -> bool:
        cluster.check_alive()
        replies = cluster.probe()
        r = replies.get(old)
        leader = agreed_leader(replies, 3)
        return r is not None and leader is not None and r.leader_id == leader != old

    wait_until(rejoined, 10, f"peer {old} to rejoin as a follower")
    assert (cluster.data_dir(old) / "raft.pers").exists()
