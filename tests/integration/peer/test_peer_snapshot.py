"""A peer that was down while the log was compacted catches up through InstallSnapshot."""

from __future__ import annotations

import shutil
from pathlib import Path

import zmq

from integration.cluster import PeerCluster, wait_for
from integration.peer.monitoring_helpers import metric_samples as _samples
from integration.peer.updates import update
from raftlog.rpc.messages import EntriesStatus, RequestEntries, RequestEntriesResponse
from raftlog.rpc.request_encoders import encode_request
from raftlog.rpc.response_decoders import decode_response

RAFT = {
    "log_compaction_threshold": 50,
    "request_id_ttl": None,  # ids bounded by count instead, so compaction may proceed
    "request_id_cache_max": 20,
}


def test_restarted_peer_catches_up_by_snapshot_after_compaction(tmp_path: Path) -> None:
    with PeerCluster(tmp_path, raft=RAFT, http=True) as cluster:
        cluster.start()
        leader = cluster.wait_leader()
        follower = next(p for p in cluster.peers if p != leader)
        cluster.kill(follower)
        last = max(update(cluster, b"entry %d" % n) for n in range(200))
        leader = cluster.wait_leader()
        compacted = wait_for(
            "the leader to compact its log",
            lambda: (i := cluster.log_info(leader)) is not None and i.first_index > 100 and i,
        )
        assert compacted.snapshot_size > 0
        cluster.start(follower)
        info = wait_for(
            "the restarted follower to install the snapshot and catch up",
            lambda: (i := cluster.log_info(follower)) is not None and i.last_applied >= last and i,
        )
        assert info.first_index > 1  # its log starts after a snapshot it received
        newer = update(cluster, b"after catch-up")
        wait_for(
            "the follower to replicate new entries",
            lambda: cluster.log_info(follower).last_applied >= newer,
        )
        # the transfer on both ends' /metrics (issue #14)
        received = ("raftlog_snapshot_transfers_total", (("direction", "received"),))
        sent = ("raftlog_snapshot_transfers_total", (("direction", "sent"),))
        base = cluster.peers[follower].http_url
        assert base is not None
        got = wait_for("the received snapshot on /metrics", lambda: _samples(base).get(received))
        assert got == 1
        assert _samples(base)[("raftlog_snapshot_transfer_bytes_total", received[1])] > 0
        senders = [p.http_url for pid, p in cluster.peers.items() if pid != follower]
        assert sum(_samples(u).get(sent, 0) for u in senders if u is not None) >= 1


def test_follower_restarted_on_a_wiped_data_directory_is_resynchronised(
    tmp_path: Path,
) -> None:
    """A replaced disk: the follower had acknowledged everything, then comes back empty. The
    leader used to probe it from its old match point forever (the follower rejecting each
    time); now it notices the follower lost entries, logs it and sends the snapshot."""
    with PeerCluster(tmp_path, raft=RAFT) as cluster:
        cluster.start()
        leader = cluster.wait_leader()
        last = max(update(cluster, b"entry %d" % n) for n in range(200))
        follower = next(p for p in cluster.peers if p != leader)
        wait_for(
            "every peer to compact",
            lambda: all(
                (i := cluster.log_info(p)) is not None and i.first_index > 100
                for p in cluster.peers
            ),
        )
        wait_for(  # the follower acknowledged everything: the leader's match for it is last
            "the follower to hold the whole log",
            lambda: (i := cluster.log_info(follower)) is not None and i.last_index >= last,
        )
        cluster.kill(follower)
        shutil.rmtree(cluster.peers[follower].data_dir)
        cluster.start(follower)
        info = wait_for(
            "the wiped follower to install the snapshot and catch up",
            lambda: (i := cluster.log_info(follower)) is not None and i.last_applied >= last and i,
        )
        assert info.first_index > 1  # its log starts after the snapshot it received
        # Whichever peer led when the follower came back noticed; on a loaded machine the
        # leadership may have moved since, so every surviving peer's log is searched.
        noticed = [
            p for p in cluster.peers
            if p != follower
            and '"follower_lost_entries"' in cluster.peers[p].log_path.read_text(encoding="utf-8")
        ]
        assert noticed, "no leader logged follower_lost_entries"


def test_request_entries_from_zero_streams_the_snapshot_then_entries(tmp_path: Path) -> None:
    with PeerCluster(tmp_path, raft=RAFT) as cluster:
        cluster.start()
        last = max(update(cluster, b"entry %d" % n) for n in range(120))
        leader = cluster.wait_leader()
        info = wait_for(
            "compaction", lambda: (i := cluster.log_info(leader)) and i.first_index > 1 and i
        )
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(cluster.peers[leader].url)
        ident = cluster.ident.encode()
        try:
            sock.send_multipart(encode_request(RequestEntries(0), ident=ident, id=b"\x09"))
            assert sock.poll(5000)
            _, first = decode_response(b"<", sock.recv_multipart())
            assert isinstance(first, RequestEntriesResponse)
            assert first.status == EntriesStatus.SNAPSHOT and first.snapshot is not None
            chunk = first.snapshot
            assert chunk.offset == 0 and chunk.index == info.first_index - 1
            assert chunk.total_size == len(chunk.data)  # the BSM snapshot is one small chunk
            follow = RequestEntries(chunk.index)
            sock.send_multipart(encode_request(follow, ident=ident, id=b"\x09"))
            got: list[int] = []
            while True:
                assert sock.poll(5000)
                _, resp = decode_response(b"<", sock.recv_multipart())
                assert isinstance(resp, RequestEntriesResponse) and resp.last_index is not None
                got += range(resp.last_index - len(resp.entries) + 1, resp.last_index + 1)
                if resp.status == EntriesStatus.LAST:
                    break
                sock.send_multipart(
                    encode_request(RequestEntries(resp.last_index), ident=ident, id=b"\x09")
                )
            assert got == list(range(chunk.index + 1, got[-1] + 1)) and got[-1] >= last
        finally:
            sock.close(linger=0)
