"""``raftlog-tool backup`` of a live peer under write load, then restore and run from it.

The backup is taken while four writers commit updates and the log compacts every ~100
entries (snapshots replace the log prefix during the copy). It must verify, restore into
fresh data directories, and a cluster started from those must hold every acknowledged
update the backup covers, at its acknowledged index, and accept new writes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from integration.cluster import PeerCluster, wait_for
from integration.peer.updates import Writers, update

TOOL = Path(sys.executable).with_name("raftlog-tool")
RAFT = {"log_compaction_threshold": 100, "request_id_cache_max": 50}


def _tool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


def _first_index(cluster: PeerCluster, peer_id: str) -> int:
    info = cluster.log_info(peer_id)
    return 0 if info is None else info.first_index


def test_backup_of_a_live_peer_restores_into_a_working_cluster(tmp_path: Path) -> None:
    backup = tmp_path / "backup"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with PeerCluster(tmp_path / "a", raft=RAFT) as live:
        live.start()
        live.wait_leader()
        ports = [
            int(url.rsplit(":", 1)[1]) for p in live.peers.values() for url in (p.url, p.pub_url)
        ]
        with Writers(live, 4) as writers:
            wait_for("some load", lambda: len(writers.acked) >= 250, 60)
            wait_for("a first compaction on peer 1", lambda: _first_index(live, "1") > 1, 60)
            done = _tool("backup", live.peers["1"].data_dir, backup, "--json")
            assert done.returncode == 0, done.stdout + done.stderr
            count_at_backup = len(writers.acked)
            wait_for("writes after the backup", lambda: len(writers.acked) >= count_at_backup + 50)
        assert not writers.errors, writers.errors
        acked = dict(writers.acked)
    report = json.loads(done.stdout)
    assert report["snapshot_index"] is not None, "the load should have compacted the log"
    assert report["first_index"] == report["snapshot_index"] + 1
    assert report["last_applied"] >= 200
    assert (
        json.loads((backup / "raftlog-backup.json").read_text())["last_index"]
        == (report["last_index"])
    )

    verified = _tool("verify", backup)
    assert verified.returncode == 0, verified.stdout
    assert verified.stdout.startswith("OK:")
    # a backup never overwrites anything
    again = _tool("backup", live.peers["1"].data_dir, backup)
    assert again.returncode == 2 and "not empty" in again.stderr

    # disaster recovery: the same backup restored for every peer of a cluster on the same
    # addresses (they are in the backed-up configuration)
    restored = PeerCluster(tmp_path / "b", ports=ports)
    for peer in restored.peers.values():
        done_restore = _tool("restore", backup, peer.data_dir)
        assert done_restore.returncode == 0, done_restore.stdout + done_restore.stderr
        assert not (peer.data_dir / "raftlog-backup.json").exists()
    with restored:
        restored.start()
        leader = restored.wait_leader()
        info = restored.log_info(leader)
        assert info is not None and info.first_index == report["first_index"]
        index = update(restored, b"written after the restore")
        assert index > report["last_index"]
        entries = dict(restored.read_all(leader, prev_index=info.first_index - 1))
    covered = {
        rid: i for rid, i in acked.items() if info.first_index <= i <= report["last_applied"]
    }
    assert len(covered) >= 50
    for rid, i in covered.items():
        assert entries[i][:12] == rid, f"acknowledged update {rid.hex()} missing at {i}"
    assert entries[index].endswith(b"written after the restore")
