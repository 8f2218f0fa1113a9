"""The ZeroMQ flood suite of issue #25 (findings 2 and 4), against real peers.

Each test floods one peer of a three-peer cluster and asserts, while the flood lasts, that
the peer answers RequestLogInfo within 1 s, that its RSS stays under ``RSS_BOUND_MB``, that
no election happens; and afterwards that its RSS comes back within 20% of where it was.

- connection flood: 10,000 ZeroMQ connections (greeting and READY: DEALERs as libzmq sees
  them) to a peer whose connection cap (half its descriptors less a reserve: 9,000 at this
  machine's 20,000) they pass; on today's main ~20,600 exhaust its descriptors and 10,000
  leave +250 MB behind;
- big messages: four senders of one message of 8 x 12 MiB frames (over the per-frame
  limit: on main, 8 x 60 MB cost ~520 MB), then four raw senders streaming one endless
  message of 8 MiB frames (libzmq would hold it whole: unbounded) -- the per-connection
  backlog cuts them.

Short by design (seconds of flood each) so that they run in ``make test``; the bounds are
documented in docs/operations.md, "Connections and messages".
"""

from __future__ import annotations

import contextlib
import resource
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zmq
from integration.cluster import PeerCluster, probe

from faults.zmtp import RawDealer
from raftlog.rpc.messages import RequestLogInfo, RequestLogInfoResponse

pytestmark = pytest.mark.timeout(240)

RSS_BOUND_MB = 300
"""Documented bound for a peer under these floods (it starts at ~60-120 MB)."""
CONNECTIONS = 10_000
RAFT = {"election_timeout_min": 1000, "election_timeout_max": 1500}
"""Election time-outs of a few heartbeats more than the defaults: "no election" is asserted
on a shared test machine, where three peers and the flood share two cores."""


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < CONNECTIONS + 1000:
        pytest.skip(f"the flood needs {CONNECTIONS + 1000} descriptors in the test process")
    with PeerCluster(tmp_path_factory.mktemp("zmq-flood"), ident="raftlog-flood",
                     raft=RAFT) as running:
        running.start()
        running.wait_stable_leader()
        yield running


class Watch:
    """Probes one peer while a flood runs: RequestLogInfo latency, RSS, terms."""

    def __init__(self, cluster: PeerCluster, peer_id: str) -> None:
        self.cluster = cluster
        self.peer = cluster.peers[peer_id]
        assert self.peer.process is not None
        self.pid = self.peer.process.pid
        self.worst_probe = 0.0
        self.peak_mb = 0.0
        self.failures: list[str] = []

    def terms(self) -> set[int]:
        return {i.term for p in self.cluster.peers if (i := self.cluster.log_info(p))}

    def settle(self) -> float:
        """The peer's RSS once it stops moving."""
        last = rss_mb(self.pid)
        for _ in range(40):
            time.sleep(0.25)
            now = rss_mb(self.pid)
            if abs(now - last) < 1:
                return now
            last = now
        return last

    def back_within(self, bound_mb: float, seconds: float) -> float:
        """Wait (at most ``seconds``) for the RSS to fall to ``bound_mb``; the last value."""
        deadline = time.monotonic() + seconds
        while (now := rss_mb(self.pid)) > bound_mb and time.monotonic() < deadline:
            time.sleep(0.5)
        return now

    def sample(self) -> None:
        self.peak_mb = max(self.peak_mb, rss_mb(self.pid))
        started = time.monotonic()
        answer = probe(self.peer.url, self.cluster.ident, RequestLogInfo(), timeout=1.0)
        took = time.monotonic() - started
        self.worst_probe = max(self.worst_probe, took)
        if not answer or not isinstance(answer[0], RequestLogInfoResponse):
            self.failures.append(f"no RequestLogInfo answer within 1 s at {time.time():.1f}")

    def during(self, flood: Callable[[threading.Event], None], seconds: float) -> None:
        """Run ``flood`` (until its event is set, at most ``seconds``), probing meanwhile."""
        stop = threading.Event()
        thread = threading.Thread(target=flood, args=(stop,), daemon=True)
        thread.start()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and thread.is_alive():
            self.sample()
            time.sleep(0.05)
        stop.set()
        thread.join(60)
        self.sample()


def test_ten_thousand_connections_come_and_go(cluster: PeerCluster) -> None:
    watch = Watch(cluster, "1")
    before_mb, terms = watch.settle(), watch.terms()
    opened: list[socket.socket] = []

    def flood(stop: threading.Event) -> None:
        for _ in range(CONNECTIONS):
            if stop.is_set():
                return
            with contextlib.suppress(OSError):  # shed while we greet: what the cap does
                opened.append(RawDealer(watch.peer.url, timeout=2.0).sock)

    watch.during(flood, 120)
    cap = (resource.getrlimit(resource.RLIMIT_NOFILE)[1] * 9 // 10) // 2
    assert len(opened) > cap, "the flood should have gone past the peer's connection cap"
    watch.sample()
    for sock in opened:
        sock.close()
    assert not watch.failures, watch.failures[:5]
    assert watch.worst_probe < 1.0
    assert watch.peak_mb < RSS_BOUND_MB, f"peak RSS {watch.peak_mb:.0f} MB"
    settled = watch.back_within(before_mb * 1.2, 30)
    fds = len(list(Path(f"/proc/{watch.pid}/fd").iterdir()))
    assert settled <= before_mb * 1.2, f"RSS {before_mb:.0f} -> {settled:.0f} MB after ({fds} fds)"
    assert watch.terms() == terms, "an election happened during the flood"


def test_big_messages_from_four_senders_stay_bounded(cluster: PeerCluster) -> None:
    watch = Watch(cluster, "2")
    before_mb, terms = watch.settle(), watch.terms()
    context = zmq.Context()
    frame = b"x" * (12 << 20)  # over the 10.1 MiB per-frame limit: refused from its header

    def whole(stop: threading.Event) -> None:
        socks = []
        for _ in range(4):
            sock = context.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(watch.peer.url)
            sock.send_multipart([b"\x01", b"?", *([frame] * 8)])
            socks.append(sock)
        stop.wait(4)
        for sock in socks:
            sock.close()

    cut = [0, 0, 0, 0]

    def endless(stop: threading.Event) -> None:
        chunk = b"y" * (8 << 20)  # under the per-frame limit: only the backlog cuts them

        def one(k: int) -> None:
            try:
                raw = RawDealer(watch.peer.url)
                raw.send_frame(b"\x01")
                while not stop.is_set():
                    raw.send_frame(chunk)
                    cut[k] += len(chunk)
            except OSError:
                return

        senders = [threading.Thread(target=one, args=(k,)) for k in range(4)]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join(30)

    try:
        watch.during(whole, 5)
        watch.during(endless, 10)
    finally:
        context.destroy(linger=0)
    assert all(0 < sent < 200 << 20 for sent in cut), f"senders were not cut: {cut}"
    assert not watch.failures, watch.failures[:5]
    assert watch.worst_probe < 1.0
    assert watch.peak_mb < RSS_BOUND_MB, f"peak RSS {watch.peak_mb:.0f} MB"
    settled = watch.back_within(before_mb * 1.2, 30)
    fds = len(list(Path(f"/proc/{watch.pid}/fd").iterdir()))
    assert settled <= before_mb * 1.2, f"RSS {before_mb:.0f} -> {settled:.0f} MB after ({fds} fds)"
    assert watch.terms() == terms, "an election happened during the flood"
    log = Path(watch.peer.log_path).read_text()
    assert log.count('"connection_shed"') <= 8, "shedding is logged 1st, 2nd, 4th... only"
