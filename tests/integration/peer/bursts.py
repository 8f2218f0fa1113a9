"""Bursts of RequestEntries streams that are never read (issue #12, finding 4): the scenario
shared by the correctness test (``test_entries_bursts``) and its timing benchmark
(``bench/bench_bursts.py``).

Before the fix every new stream had up to five 64 KiB batches read and sent from inside the
message handler, and each unread stream parked them in the ROUTER's queues: 50, 200 and 1,000
such streams were each followed by an election. The test checks what must hold on any
machine (every write answered and durable, the peers alive, the leader serving); whether the
leader *kept its office* and how slow the worst write was depend on the machine's load, so
the benchmark measures them (issue #33 item 1).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from integration.cluster import PeerCluster
from integration.peer.updates import update

BURSTS: Final = (50, 200, 1000)
BURST_SECONDS: Final = 3.5
"""Each burst is held this long: many election timeouts."""
RAFT: Final = {
    "request_entries_ttl": 1000,
    "election_timeout_min": 400,
    "election_timeout_max": 600,
}
"""Streams left by a burst expire after 1 s (swept every 2 s), so each burst meets a leader
whose earlier silent streams are gone and pushes its own batches. Election timeouts of
400-600 ms: on a shared 2-core box every peer at once sometimes stalls 100-650 ms in fsync
or unscheduled, and the default timeouts then see elections without any burst."""

SILENT_CLIENTS: Final = """
import sys, zmq
from raftlog.rpc.request_encoders import encode_request
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


def prefill(cluster: PeerCluster) -> None:
    """~1.2 MB of log: every stream has five full batches to send."""
    for n in range(600):
        update(cluster, b"%05d" % n + b"x" * 2000, timeout=60)


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
    """How many times the peer logging to ``log_path`` became leader."""
    return sum(1 for line in log_path.read_text().splitlines() if '"became_leader"' in line)


def max_loop_stall_ms(log_path: Path) -> float:
    """The longest loop pass the peer logged when it stopped (``peer_stopping``)."""
    for line in reversed(log_path.read_text().splitlines()):
        if '"peer_stopping"' in line:
            return float(json.loads(line)["max_loop_stall_ms"])
    raise AssertionError(f"no peer_stopping line in {log_path}")
