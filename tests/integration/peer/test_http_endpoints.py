"""The monitoring listener of real peers: /metrics, /healthz, /readyz over HTTP."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from integration.cluster import PeerCluster, wait_for
from integration.peer.monitoring_helpers import http_get as _get
from integration.peer.monitoring_helpers import metric_samples as _samples
from integration.peer.updates import update
from integration.secure_setup import ClientSpec, SecureSetup


def test_every_peer_serves_metrics_health_and_readiness(tmp_path: Path) -> None:
    with PeerCluster(tmp_path, http=True) as cluster:
        cluster.start()
        leader = cluster.wait_stable_leader()
        urls = {pid: p.http_url for pid, p in cluster.peers.items()}
        assert all(urls.values())
        for peer_id, base in urls.items():
            assert base is not None
            wait_for(f"{peer_id} ready", lambda b=base: _get(b + "/readyz")[0] == 200)
            status, body = _get(base + "/healthz")
            assert status == 200 and json.loads(body) == {"ok": True, "reason": "ok"}
        index = update(cluster, b"first")
        leader_base = urls[leader]
        assert leader_base is not None

        def replicated() -> bool:
            got = _samples(leader_base)
            return got[("raftlog_commit_index", ())] >= index and all(
                got.get(("raftlog_follower_lag_entries", (("peer_id", p),))) == 0
                for p in cluster.peers
            )

        wait_for("followers caught up on the leader's /metrics", replicated)
        got = _samples(leader_base)
        assert got[("raftlog_role", (("role", "leader"),))] == 1
        assert got[("raftlog_leader", (("leader_id", leader),))] == 1
        assert got[("raftlog_elections_won_total", ())] >= 1
        assert got[("raftlog_fsync_duration_seconds_count", ())] >= 1
        assert got[("raftlog_log_entries_appended_total", ())] >= 1
        follower = next(p for p in cluster.peers if p != leader)
        follower_base = urls[follower]
        assert follower_base is not None
        wait_for(
            "the follower applied the update",
            lambda: _samples(follower_base).get(("raftlog_log_entries_applied_total", ()), 0) >= 1,
        )
        assert _samples(follower_base)[("raftlog_role", (("role", "follower"),))] == 1

        # the leader gone: the survivors are unready until they elect a new one
        cluster.kill(leader)
        new_leader = cluster.wait_leader(exclude=leader)
        new_base = urls[new_leader]
        assert new_base is not None
        wait_for(
            "the new leader ready as leader",
            lambda: json.loads(_get(new_base + "/readyz")[1])["reason"].startswith("ok: leader"),
        )


def test_a_taken_http_port_stops_the_peer_with_a_clear_error(tmp_path: Path) -> None:
    with PeerCluster(tmp_path, ids=("1",), http=True) as cluster:
        base = cluster.peers["1"].http_url
        assert base is not None
        holder = socket.socket()
        try:
            holder.bind(("127.0.0.1", int(base.rsplit(":", 1)[1])))
            holder.listen()
            cluster.start()
            process = cluster.peers["1"].process
            assert process is not None
            assert process.wait(30) == 2
        finally:
            holder.close()
        assert "cannot serve HTTP" in cluster.peers["1"].log_path.read_text()
        cluster.peers["1"].process = None


def test_the_status_data_sees_every_member_in_a_curve_cluster(tmp_path: Path) -> None:
    """The page's RequestLogInfo polls use the peer's own CURVE keys: members admit them.
    On a secure cluster the monitoring endpoints want a token of the allowlist (issue #25
    finding 7): without one they answer 401 and name nothing."""
    secure = SecureSetup(tmp_path / "secure", clients=[ClientSpec("admin", "admin", token="t0")])
    with PeerCluster(tmp_path, http=True, security=secure) as cluster:
        cluster.start()
        leader = cluster.wait_leader()
        base = cluster.peers[next(p for p in cluster.peers if p != leader)].http_url
        assert base is not None
        for path in ("/metrics", "/", "/api/cluster", "/api/history"):
            for token in (None, "guessed"):
                status, body = _get(base + path, token)
                assert status == 401 and "raftlog_" not in body and leader not in body, path
            assert _get(base + path, "t0")[0] == 200
        assert _get(base + "/healthz")[0] == 200  # probes stay open

        def all_up_with_the_leader() -> bool:
            data = json.loads(_get(base + "/api/cluster", "t0")[1])
            roles = {m["id"]: m["role"] for m in data.get("members", ())}
            return data.get("ready") and "down" not in roles.values() and roles[leader] == "leader"

        wait_for("every member up, the leader leading, on the status data", all_up_with_the_leader)
