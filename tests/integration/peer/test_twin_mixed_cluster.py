"""A cluster whose peers run different twins (raftlog/speedups.py): one peer on the
pure-Python ones (``RAFTLOG_PURE_PYTHON=1``), two on the compiled ones. Whoever leads, every
peer must store byte-identical records and serve the same entries: the end-to-end proof that
the twins are interchangeable, and CI's run of a whole peer on the pure twins (the rest of
the suite runs the compiled ones where they were built)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from integration.cluster import PeerCluster, wait_for
from integration.peer.updates import update
from raftlog.entry import LogEntry
from raftlog.storage.rocks import open_storage

ADMIN = Path(sys.executable).parent / "raftlog-admin"


def _lead(cluster: PeerCluster, peer_id: str) -> None:
    """Hand leadership to ``peer_id`` (raftlog-admin leader transfer) and wait for it."""
    if cluster.wait_stable_leader(60) != peer_id:
        moved = subprocess.run(
            [str(ADMIN), "--config", str(cluster.config_path), "--timeout", "30",
             "leader", "transfer", "--to", peer_id],
            capture_output=True, text=True, timeout=120, check=False,
        )
        assert moved.returncode == 0, moved.stderr
    wait_for(f"peer {peer_id} to lead", lambda: cluster.leader() == peer_id, 60)


def _started_line(cluster: PeerCluster, peer_id: str) -> dict[str, object]:
    for line in (cluster.directory / f"{peer_id}.log").read_text(encoding="utf-8").splitlines():
        if '"peer_started"' in line:
            event: dict[str, object] = json.loads(line)
            return event
    raise AssertionError(f"peer {peer_id} logged no peer_started line")


def test_pure_and_compiled_peers_store_the_same_bytes(tmp_path: Path) -> None:
    cluster = PeerCluster(tmp_path)
    pure_id = next(iter(cluster.peers))
    cluster.peers[pure_id].env["RAFTLOG_PURE_PYTHON"] = "1"
    with cluster:
        cluster.start()
        compiled_id = next(p for p in cluster.peers if p != pure_id)
        _lead(cluster, compiled_id)
        assert "records pure" in str(_started_line(cluster, pure_id)["speedups"])
        indexes = [update(cluster, b"twin %d " % n + bytes(range(n % 200))) for n in range(40)]
        # the pure peer leads for the second half: its own appends, reads and sends
        _lead(cluster, pure_id)
        indexes += [update(cluster, b"pure-led %d" % n) for n in range(40)]
        last = indexes[-1]
        for peer_id in cluster.peers:
            wait_for(
                f"peer {peer_id} to apply {last}",
                lambda p=peer_id: (i := cluster.log_info(p)) is not None
                and i.last_applied >= last,
            )
        served = cluster.read_all(pure_id)[:last]
        cluster.stop()
    stored = []
    for peer in cluster.peers.values():
        store, hard, snaps = open_storage(peer.data_dir, read_only=True)
        try:
            stored.append(store.raw_entries(1, last + 1))
        finally:
            store.close(), hard.close(), snaps.close()
    assert all(log == stored[0] for log in stored[1:])
    assert [raw for _, raw in served] == stored[0]
    datas = [LogEntry.from_bytes(raw).data for raw in stored[0]]
    assert sum(d.startswith(b"pure-led") for d in datas) == 40
