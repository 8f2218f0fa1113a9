"""Recovery after losing a majority for good (issue #33 item 10): ``raftlog-tool
force-new-cluster`` on a stopped survivor makes it a one-peer cluster that keeps its whole
committed prefix and commits again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from integration.cluster import PeerCluster, wait_for
from integration.peer.updates import assert_acked_exactly_once, new_request_id, update

TOOL = Path(sys.executable).parent / "raftlog-tool"


def tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TOOL), *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_a_survivor_becomes_a_new_cluster_with_its_committed_prefix(tmp_path: Path) -> None:
    with PeerCluster(tmp_path) as cluster:
        cluster.start()
        cluster.wait_stable_leader(60)
        acked: dict[bytes, int] = {}
        for n in range(20):
            rid = new_request_id()
            acked[rid] = update(cluster, b"before-the-loss-%d" % n, rid, timeout=60)
        survivor = cluster.wait_stable_leader(60)
        # every acknowledged write is on the survivor (it led, so it has them all)
        lost = [p for p in cluster.peers if p != survivor]
        for peer_id in lost:
            cluster.kill(peer_id)  # the majority is gone for good
        assert cluster.terminate(survivor) == 0
        data = str(cluster.peers[survivor].data_dir)
        members = f"{survivor}={cluster.peers[survivor].url}"

        refused = tool("force-new-cluster", data, "--members", members)
        assert refused.returncode == 2 and "LOST" in refused.stdout
        assert "add --yes" in refused.stderr
        done = tool("force-new-cluster", data, "--members", members, "--yes")
        assert done.returncode == 0, done.stderr
        assert "WARNING" in done.stdout and "is kept" in done.stdout

        cluster.start(survivor)
        wait_for("the survivor to lead alone", lambda: cluster.leader() == survivor, 60)
        rid = new_request_id()
        acked[rid] = update(cluster, b"after-the-recovery", rid, timeout=60)
        assert_acked_exactly_once(cluster, survivor, acked)
        config = cluster.config_of(survivor)
        assert config is not None and [p.id for p in config.peers] == [survivor]
