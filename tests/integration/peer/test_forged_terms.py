"""One forged RequestVote must not brick the cluster (issue #12, finding 1).

The forgery names a configured peer id (ids are public through RequestConfig), carries the
right cluster ident and a term of 2^53-1 (or 2^53-2): the largest numbers the wire can carry.
A peer used to adopt and persist the term, then fail to encode its own next RequestVote and
exit 1 -- at every restart. Now the codec drops it as ``term_out_of_range``, a term a peer
could encode but not adopt (2^48-1, 2^48-2) is dropped as ``term_above_ceiling`` even while
no leader is heard (issue #24); and a peer that
finds such a term on disk (written by an older version) exits 4 with one line that names the
repair, ``raftlog-tool reset-term``.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import zmq

from integration.cluster import PeerCluster, wait_for
from integration.peer.updates import update
from raftlog.bounds import MAX_INDEX, MAX_TERM
from raftlog.rpc.frames import encode_msg_id
from raftlog.rpc.messages import RequestVote
from raftlog.rpc.request_encoders import encode_request
from raftlog.storage.rocks import open_storage

FORGED_TERMS = (2**53 - 1, 2**53 - 2, MAX_TERM, MAX_TERM - 1)
"""The wire's largest numbers (dropped by the codec) and the encoding cap (issue #24: a term of
exactly 2^48-1 was adopted and left the cluster leaderless for good; now above the adoption
ceiling, ``raftlog.bounds.term_adoptable``)."""
SMALL = 1_000
"""Terms stay far below this in a healthy test cluster."""
TOOL_BIN = Path(sys.executable).with_name("raftlog-tool")


def _send(url: str, frames_list: list[list[bytes]]) -> None:
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 2000)
    sock.connect(url)
    for frames in frames_list:
        sock.send_multipart(frames)
    sock.close()


def _terms(cluster: PeerCluster) -> dict[str, int]:
    out = {}
    for peer_id, peer in cluster.peers.items():
        if peer.running:
            info = cluster.log_info(peer_id)
            assert info is not None, f"peer {peer_id} does not answer"
            out[peer_id] = info.term
    return out


def _forge(cluster: PeerCluster) -> None:
    """Every peer gets forged RequestVotes in the name of each of the other peers."""
    ident = cluster.ident.encode()
    for target in cluster.peers.values():
        forged = [
            encode_request(
                RequestVote(candidate, term, min(term, MAX_INDEX), term),  # "up to date"
                ident=ident,
                id=encode_msg_id(n + 1),
            )
            for n, (candidate, term) in enumerate(
                (c, t) for c in cluster.peers if c != target.id for t in FORGED_TERMS
            )
        ]
        _send(target.url, forged)


def test_forged_huge_terms_are_dropped_and_the_cluster_keeps_electing(tmp_path: Path) -> None:
    with PeerCluster(tmp_path) as cluster:
        cluster.start()
        cluster.wait_stable_leader()
        update(cluster, b"before")
        _forge(cluster)
        update(cluster, b"after forgery")
        assert max(_terms(cluster).values()) < SMALL

        # The cluster still elects: depose the leader twice (kill -9, then restart it).
        for round_no in range(2):
            leader = cluster.wait_leader()
            cluster.kill(leader)
            _forge(cluster)  # while nobody leads: no stickiness, only the ceiling protects
            new_leader = cluster.wait_leader(exclude=leader, timeout=30)
            update(cluster, f"round {round_no}".encode())
            cluster.start(leader)
            assert new_leader != leader
            _forge(cluster)  # again, now against the new leader too
        wait_for("all peers up", lambda: all(cluster.log_info(p) for p in cluster.peers))
        update(cluster, b"final")
        terms = _terms(cluster)
        assert len(terms) == 3 and max(terms.values()) < SMALL, terms
        for peer in cluster.peers.values():
            assert peer.running, peer.log_path.read_text()[-2000:]
            # counted and logged as what it is, not as a malformed message
            text = peer.log_path.read_text()
            assert "term_out_of_range" in text and "term_above_ceiling" in text


def test_an_out_of_range_term_on_disk_exits_4_and_reset_term_repairs_it(tmp_path: Path) -> None:
    with PeerCluster(tmp_path) as cluster:
        cluster.start()
        cluster.wait_stable_leader()
        update(cluster, b"one")
        victim = next(p for p in cluster.peers if p != cluster.wait_leader())
        assert cluster.terminate(victim) == 0
        # What an older version left behind after adopting the forged term.
        log, hard_state, snapshots = open_storage(cluster.peers[victim].data_dir)
        hard_state.save(replace(hard_state.load(), current_term=2**53 - 1, voted_for="1"))
        last_term = log.term_at(log.last_index) or 0
        for store in (log, hard_state, snapshots):
            store.close()

        cluster.start(victim)
        process = cluster.peers[victim].process
        assert process is not None
        assert process.wait(30) == 4
        cluster.peers[victim].process = None
        text = cluster.peers[victim].log_path.read_text()
        errors = [line for line in text.splitlines() if line.startswith("raftlog-peer: error:")]
        assert len(errors) == 1 and "raftlog-tool reset-term" in errors[0], text[-2000:]
        assert "Traceback" not in text

        # The documented repair: above every log term and every running peer's term.
        running = max(_terms(cluster).values())
        new_term = max(running, last_term) + 1
        assert new_term < MAX_TERM
        done = subprocess.run(
            [
                str(TOOL_BIN),
                "reset-term",
                str(cluster.peers[victim].data_dir),
                "--term",
                str(new_term),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done
        cluster.start(victim)
        wait_for("the repaired peer to serve", lambda: cluster.log_info(victim), timeout=30)
        update(cluster, b"two")
        assert cluster.peers[victim].running
        assert max(_terms(cluster).values()) < SMALL
