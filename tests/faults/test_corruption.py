"""Corruption on one follower (``faults.corruption``): detected, refused with one clear line,
repaired by the documented step; the cluster serves throughout and loses nothing."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from integration.cluster import PeerCluster, wait_for

from faults.corruption import KINDS, corrupt_follower, flip_bit
from faults.harness import RunOptions, run_schedule
from faults.power import COMPACTING_RAFT, TOPIC_RETENTION_MS
from raftlog.client import SyncRaftClient
from raftlog.storage.rocks import LOG_DIR, open_log_database


@pytest.mark.parametrize("kind", KINDS)
def test_a_corrupt_follower_is_refused_and_rebuilt(kind: str, tmp_path: Path) -> None:
    options = RunOptions(
        duration=0.0, raft=dict(COMPACTING_RAFT), topic_retention_ms=TOPIC_RETENTION_MS
    )
    result = run_schedule(f"corrupt_{kind}", corrupt_follower(kind), tmp_path, 21, options)
    print(f"{kind}: {result.row()} did={result.did}")
    assert result.did.get("exit_code_3") == 1, f"the damaged peer did not exit 3: {result.did}"
    assert result.did.get("detected") == 1, "no 'corrupt data' line with the recovery"
    assert result.did.get("repaired") == 1
    assert result.report.valid, result.report.summary()


def test_a_bad_table_block_is_found_when_read_and_never_served(tmp_path: Path) -> None:
    """A flipped bit in a cold table block passes start-up (nothing reads it); the first
    read that touches it — here the peer, now leader, streaming the log to a client and a
    follower — must end the peer with the corrupt-data line, never hand the entry out."""
    written = [b"%04d" % i + b"x" * 200 for i in range(300)]
    with PeerCluster(tmp_path) as cluster:
        cluster.start()
        leader = cluster.wait_stable_leader(30)
        with SyncRaftClient(cluster.urls, cluster.ident) as client:
            for data in written:
                client.request_update(data)
        victim, third = [p for p in cluster.peers if p != leader]
        cluster.terminate(victim)
        log_dir = cluster.peers[victim].data_dir / LOG_DIR
        database = open_log_database(log_dir)  # every entry into table files
        database.compact_all()
        database.release()
        table = max(log_dir.glob("*.sst"), key=lambda p: p.stat().st_size)
        flip_bit(table, table.stat().st_size // 4, random.Random(5))
        cluster.start(victim)
        cluster.kill(third)  # the victim must lead (only it and the old leader are left)
        cluster.kill(leader)
        cluster.start(leader, extra_args=["--set", "first_election_extra=10000"])  # votes only
        wait_for("the damaged peer to lead", lambda: cluster.leader() == victim or None, 60)
        try:
            served = [data for _index, data in cluster.read_all(victim)]
        except AssertionError:
            served = []  # the peer went away mid-stream: nothing wrong was handed out
        assert all(data in written for data in served)
        peer = cluster.peers[victim]
        wait_for("the damaged peer to stop", lambda: not peer.running, 60)
        assert peer.process is not None and peer.process.wait(10) == 3
        text = peer.log_path.read_text()
        assert "raftlog-peer: corrupt data: reading entry" in text
        assert "block checksum mismatch" in text
