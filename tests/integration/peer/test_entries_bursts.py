"""Bursts of RequestEntries streams that are never read do not cost the leader its office
(issue #12, finding 4).

Before: every new stream had up to five 64 KiB batches read and sent from inside the message
handler, and each unread stream parked them in the ROUTER's queues. 50, 200 and 1,000 such
streams were each followed by an election, and a normal writer's worst latency reached
1.1-1.5 s. Now batches go out in a bounded slice of each loop pass, under a cap on
unacknowledged stream bytes. Bounds here are generous (a loaded 2-core CI box): this is a
correctness test -- no leader change -- not a benchmark.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import zmq

from integration.cluster import PeerCluster
from integration.peer.updates import new_request_id, update
from raftlog.rpc.codec import encode_request
from raftlog.rpc.messages import RequestUpdate, RequestUpdateResponse, UpdateStatus
from raftlog.rpc.responses import decode_response

BURSTS = (50, 200, 1000)
WORST_WRITE_S = 1.0
"""Normal writes take a few ms; before the fix the worst was 1.1-2.3 s (and an election)."""


class Writer(threading.Thread):
    """One client committing small updates to the leader over one connection, back to back
    with short pauses; each latency is one RequestUpdate round trip to its final answer."""

    def __init__(self, cluster: PeerCluster, leader: str) -> None:
        super().__init__(daemon=True)
        self.url = cluster.peers[leader].url
        self.cluster_ident = cluster.ident.encode()
        self.latencies: list[tuple[float, float]] = []
        """(start, seconds) of every write."""
        self.errors: list[object] = []
        self.done = threading.Event()

    def run(self) -> None:
        context = zmq.Context()
        sock = context.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(self.url)
        try:
            n = 0
            while not self.done.is_set():
                self._write(sock, b"light load %d" % n)
                n += 1
                self.done.wait(0.02)
        finally:
            sock.close(linger=0)
            context.term()

    def _write(self, sock: zmq.Socket[bytes], data: bytes) -> None:
        frames = encode_request(RequestUpdate(new_request_id(), data), ident=self.cluster_ident)
        started = time.monotonic()
        sock.send_multipart(frames)
        while sock.poll(5000):
            _, answer = decode_response(frames[1], sock.recv_multipart())
            assert isinstance(answer, RequestUpdateResponse)
            if answer.status != UpdateStatus.ACCEPTED:
                self.latencies.append((started, time.monotonic() - started))
                if answer.status != UpdateStatus.DONE:
                    self.errors.append(answer)
                return
        self.errors.append("no final answer within 5 s")

    @property
    def worst(self) -> float:
        return max(seconds for _, seconds in self.latencies)


SILENT_CLIENTS = """
import sys, zmq
from raftlog.rpc.codec import encode_request
from raftlog.rpc.messages import RequestEntries
url, ident, n = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
context = zmq.Context()
context.set(zmq.MAX_SOCKETS, n + 16)
socks = []
for i in range(n):
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVHWM, 10)
    sock.connect(url)
    sock.send_multipart(encode_request(RequestEntries(0), ident=ident, id=i.to_bytes(4, "big")))
    socks.append(sock)
print("open", flush=True)
sys.stdin.read()  # until the test closes our stdin; the streams are never read
"""


@contextlib.contextmanager
def unread_streams(url: str, ident: str, n: int) -> Iterator[None]:
    """``n`` clients in another process (as real clients are), each opening one
    RequestEntries stream from index 0 and never reading it."""
    process = subprocess.Popen(
        [sys.executable, "-c", SILENT_CLIENTS, url, ident, str(n)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "open"
        yield
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def leaderships(log_path: Path) -> int:
    return sum(1 for line in log_path.read_text().splitlines() if '"became_leader"' in line)


def max_loop_stall_ms(log_path: Path) -> float:
    for line in reversed(log_path.read_text().splitlines()):
        if '"peer_stopping"' in line:
            return float(json.loads(line)["max_loop_stall_ms"])
    raise AssertionError(f"no peer_stopping line in {log_path}")


def test_bursts_of_unread_streams_cause_no_election(tmp_path: Path) -> None:
    # Streams left by a burst expire after 1 s (swept every 2 s), so each burst meets a leader
    # whose earlier silent streams are gone and pushes its own batches. Election timeouts are
    # 400-600 ms, not 200-300: on a 2-core box shared with other test runs (load average
    # 8-16 measured) every peer at once sometimes stalls 100-650 ms in fsync or unscheduled,
    # whatever it does, and the default timeouts then see elections without any burst.
    # Measured before the fix with these timeouts: worst writes of 1.05-2.8 s in 3 of 3 runs
    # (and elections with the default timeouts); after: 3 of 3 under 1 s, no leader change.
    raft = {
        "request_entries_ttl": 1000,
        "election_timeout_min": 400,
        "election_timeout_max": 600,
    }
    with PeerCluster(tmp_path, raft=raft) as cluster:
        cluster.start()
        leader = cluster.wait_stable_leader()
        for n in range(600):  # ~1.2 MB of log: every stream has five full batches to send
            update(cluster, b"%05d" % n + b"x" * 2000)
        terms = {p: cluster.log_info(p).term for p in cluster.peers}  # type: ignore[union-attr]
        elected = {p.id: leaderships(p.log_path) for p in cluster.peers.values()}
        writer = Writer(cluster, leader)
        writer.start()
        try:
            for burst in BURSTS:
                with unread_streams(cluster.peers[leader].url, cluster.ident, burst):
                    time.sleep(3.5)  # many election timeouts under the burst
        finally:
            writer.done.set()
            writer.join(30)
        assert not writer.errors, writer.errors
        assert len(writer.latencies) > 20
        assert writer.worst < WORST_WRITE_S, sorted(writer.latencies, key=lambda x: x[1])[-5:]
        assert cluster.leader() == leader
        assert {p: cluster.log_info(p).term for p in cluster.peers} == terms  # type: ignore[union-attr]
        assert {p.id: leaderships(p.log_path) for p in cluster.peers.values()} == elected
        cluster.stop()
    # the node's own measurement: no pass held the loop for a whole election timeout
    stall = max_loop_stall_ms(cluster.peers[leader].log_path)
    assert stall < 600, stall
