"""Load generators and process probes of the HTTP flood tests (``test_http_flood``).

- :class:`HalfOpenFlood`: a thread that keeps ``count`` connections open to a listener,
  each having sent a request line and a header but never the blank line that ends the
  headers, trickling one more header line every round; dropped ones are reconnected.
- :class:`PeerWatch`: what the tests assert about a peer process: RequestLogInfo on its
  ZeroMQ port within 1 s, ``/healthz`` within 2 s, RSS, CPU seconds, open descriptors and
  its log's line count (all from ``/proc`` or real requests, nothing self-reported).
"""

from __future__ import annotations

import json
import os
import select
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from integration.cluster import PeerCluster, probe

from raftlog.rpc.messages import RequestLogInfo, RequestLogInfoResponse
from raftlog.topics.sync_client import SyncTopicClient

RSS_BOUND_MB = 300
"""The documented bound (docs/operations.md, "HTTP limits"): a flooded peer stays under it."""
LOG_INFO_WITHIN = 1.0
HEALTHZ_WITHIN = 2.0


@dataclass
class PeerWatch:
    """Observations of one running peer of ``cluster``."""

    cluster: PeerCluster
    peer_id: str
    slow: list[str] = field(default_factory=list)
    """Every probe that was too slow or failed, with what happened."""
    peak_fds: int = 0
    """The most descriptors :meth:`keeps_answering` saw the peer hold."""

    @property
    def pid(self) -> int:
        process = self.cluster.peers[self.peer_id].process
        assert process is not None
        return process.pid

    def rss_mb(self) -> float:
        with open(f"/proc/{self.pid}/status") as f:
            line = next(x for x in f if x.startswith("VmRSS:"))
        return int(line.split()[1]) / 1024

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def log_lines(self) -> int:
        with open(self.cluster.peers[self.peer_id].log_path, "rb") as f:
            return sum(1 for _ in f)

    def log_info_in_time(self) -> bool:
        """RequestLogInfo on a fresh DEALER answered within ``LOG_INFO_WITHIN``."""
        started = time.monotonic()
        got = probe(self.cluster.peers[self.peer_id].url, self.cluster.ident, RequestLogInfo(),
                    timeout=LOG_INFO_WITHIN, curve=self.cluster.curve)
        took = time.monotonic() - started
        ok = bool(got) and isinstance(got[0], RequestLogInfoResponse) and took <= LOG_INFO_WITHIN
        if not ok:
            self.slow.append(f"RequestLogInfo: {got!r} after {took:.2f}s")
        return ok

    def healthz_in_time(self) -> bool:
        """``/healthz`` on a fresh connection answered 200 within ``HEALTHZ_WITHIN``."""
        base = self.cluster.peers[self.peer_id].http_url
        started = time.monotonic()
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=HEALTHZ_WITHIN) as answer:
                status = answer.status
        except (urllib.error.URLError, OSError) as exc:
            status = -1
            self.slow.append(f"/healthz: {exc!r}")
        took = time.monotonic() - started
        if status != 200 or took > HEALTHZ_WITHIN:
            self.slow.append(f"/healthz: {status} after {took:.2f}s")
            return False
        return True

    def keeps_answering(self, seconds: float,
                        each_round: Callable[[], object] | None = None) -> int:
        """Probe both ways for ``seconds`` (and call ``each_round``); the number of rounds
        (failures in ``slow``, the most descriptors seen in ``peak_fds``)."""
        rounds = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.log_info_in_time()
            self.healthz_in_time()
            if each_round is not None:
                each_round()
            self.peak_fds = max(self.peak_fds, self.descriptors())
            rounds += 1
            time.sleep(0.2)
        return rounds

    def wait_rss_back(self, baseline: float, timeout: float = 20.0) -> float:
        """RSS once it is within 20% of ``baseline`` (or what it is after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while (rss := self.rss_mb()) > 1.2 * baseline and time.monotonic() < deadline:
            time.sleep(0.25)
        return rss


def metric(url: str, name: str) -> float:
    """The value of the unlabelled (or fully labelled) series ``name`` in ``/metrics`` of the
    HTTP listener at ``url``."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    line = next(x for x in text.splitlines() if x.startswith(name + " "))
    return float(line.split()[1])


FLOOD_RAFT: Final = {"election_timeout_min": 1000, "election_timeout_max": 1500}
"""Election time-outs of a few heartbeats more than the defaults: the flood tests assert
"no election" on a shared test machine."""


@contextmanager
def limited_cluster(directory: Path, ident: str, limits: tuple[str, ...], *,
                    kafka: bool = False, topics: tuple[str, ...] = ()) -> Iterator[PeerCluster]:
    """Three peers with HTTP (and Kafka) listeners under the cluster-file ``limits`` lines,
    started, a leader stable, ``topics`` created."""
    with PeerCluster(directory, ident=ident, http=True, kafka=kafka, raft=FLOOD_RAFT,
                     extra_toml=limits) as running:
        running.start()
        running.wait_stable_leader()
        if topics:
            with SyncTopicClient(running.urls, running.ident, timeout=20) as client:
                for name in topics:
                    client.create_topic(name)
        yield running


def json_post(path: str, body: object) -> bytes:
    """A raw HTTP/1.1 POST of ``body`` as JSON to ``path``."""
    data = json.dumps(body).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n").encode() + data


@contextmanager
def slow_reader(where: tuple[str, int], source: str, request: bytes) -> Iterator[socket.socket]:
    """A connection from ``source`` with a 4 KiB receive buffer that has sent ``request``
    (and reads only what the caller reads): a client that leaves its answer in the peer."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.bind((source, 0))
        sock.connect(where)
        sock.sendall(request)
        yield sock


def cluster_terms(cluster: PeerCluster) -> set[int]:
    """The terms the cluster's peers report: more than one, or a new one, is an election."""
    return {info.term for p in cluster.peers if (info := cluster.log_info(p)) is not None}


@contextmanager
def one_limited_peer(cluster: PeerCluster, nofile: int) -> Iterator[PeerCluster]:
    """``cluster`` running with peer 1's ``RLIMIT_NOFILE`` lowered to ``nofile`` (the peer a
    flood test floods), its leader stable."""
    with cluster as running:
        running.peers["1"].nofile = nofile
        running.start("1")
        running.start("2", "3")
        running.wait_stable_leader()
        yield running


class HalfOpenFlood:
    """``count`` half-open HTTP connections to ``port``, spread over ``sources`` (loopback
    addresses), kept up by a thread until ``stop``. ``greeting`` is what each sends first
    and ``trickle`` what it adds every round; both empty make bare connections that never
    send a byte (the Kafka listener's flood)."""

    def __init__(self, port: int, count: int, sources: list[str], *,
                 greeting: bytes = b"GET /healthz HTTP/1.1\r\nHost: flood\r\n",
                 trickle: bytes = b"X-Trickle: 1\r\n") -> None:
        self._port = port
        self._greeting = greeting
        self._trickle = trickle
        self._sources = sources
        self._socks: list[socket.socket | None] = [None] * count
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="half-open-flood", daemon=True)
        self.connects = 0
        self.failures = 0

    def __enter__(self) -> HalfOpenFlood:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def open(self) -> int:
        return sum(1 for s in self._socks if s is not None)

    def _connect(self, n: int) -> None:
        source = self._sources[n % len(self._sources)]
        try:
            sock = socket.create_connection(("127.0.0.1", self._port), timeout=0.5,
                                            source_address=(source, 0))
            if self._greeting:
                sock.sendall(self._greeting)
        except OSError:
            self.failures += 1
            return
        self.connects += 1
        self._socks[n] = sock

    def _run(self) -> None:
        while not self._stop.is_set():
            for n, sock in enumerate(self._socks):
                if self._stop.is_set():
                    break
                if sock is None:
                    self._connect(n)
                    continue
                if not self._alive(sock):
                    sock.close()
                    self._socks[n] = None
            self._stop.wait(0.2)

    def _alive(self, sock: socket.socket) -> bool:
        """Trickle on ``sock``, or without a trickle see whether the listener closed it."""
        try:
            if self._trickle:
                sock.send(self._trickle)
                return True
            # a socket with a time-out waits for data even with MSG_DONTWAIT: ask select
            return not select.select([sock], [], [], 0)[0] or sock.recv(1, socket.MSG_PEEK) != b""
        except OSError:
            return False

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for n, sock in enumerate(self._socks):
            if sock is not None:
                sock.close()
                self._socks[n] = None
