"""The physical floor of a committed update on this machine, measured beside the cluster figures
(issue #28, item 4), so every run shows how far raftlog is from what the hardware allows.

Three figures, each a median over ``FLOOR_SAMPLES`` (``RAFTLOG_BENCH_FLOOR_SAMPLES``), and
for the two with a disk in them the 99th percentile too (the issue's p99 target has a floor
as well: a shared virtual disk's slow syncs reach it):

* **fdatasync**: a 100-byte write plus ``fdatasync`` on a preallocated file in the data
  directory's file system (what one durable append costs at least; RocksDB's WAL does the
  same and more);
* **ZeroMQ round trip**: one small message DEALER -> ROUTER -> DEALER between two processes on
  loopback TCP (a committed update crosses four such hops: client, leader, follower, back);
* **raw TCP + fdatasync, three processes**: a minimal replicated write with no Raft, no
  ZeroMQ and no serialisation -- a client sends 100 bytes to a "leader" process over TCP,
  the leader forwards them to two "follower" processes and appends them to its own file
  with ``fdatasync``; each follower appends with ``fdatasync`` and answers; the leader
  answers the client once its own write and one follower's are durable (a majority of
  three). Its p50 at one update in flight is the floor a Raft implementation approaches.

Run on its own: ``python -m bench.floor [DIR]``.
"""

from __future__ import annotations

import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import zmq

SAMPLES = int(os.environ.get("RAFTLOG_BENCH_FLOOR_SAMPLES", "400"))
PAYLOAD = b"x" * 100
FILE_SIZE = 64 * 1024 * 1024
_LEN = struct.Struct("!I")


@dataclass(frozen=True)
class Floor:
    """The three floor figures (ms, medians) and the 99th percentiles of the two that sync."""

    fdatasync_ms: float
    zmq_rtt_ms: float
    tcp_three_ms: float
    fdatasync_p99_ms: float
    tcp_three_p99_ms: float


def _p50_p99(seconds: list[float]) -> tuple[float, float]:
    """Median and 99th percentile (nearest rank) in ms."""
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, (len(ordered) * 99 + 99) // 100 - 1)]
    return statistics.median(ordered) * 1000, p99 * 1000


class _Appender:
    """Appends records to a preallocated file and fdatasyncs each (what a log must do)."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        os.posix_fallocate(self.fd, 0, FILE_SIZE)
        os.fsync(self.fd)
        self.offset = 0

    def append(self, data: bytes) -> None:
        if self.offset + len(data) > FILE_SIZE:
            self.offset = 0
        os.pwrite(self.fd, data, self.offset)
        self.offset += len(data)
        os.fdatasync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


def fdatasync_times(directory: Path, samples: int = SAMPLES) -> tuple[float, float]:
    """Median and p99 ms of a 100-byte write + fdatasync on a preallocated file in
    ``directory``."""
    appender = _Appender(directory / "floor-fdatasync")
    try:
        times = []
        for _ in range(samples):
            t0 = time.perf_counter()
            appender.append(PAYLOAD)
            times.append(time.perf_counter() - t0)
        return _p50_p99(times)
    finally:
        appender.close()


def zmq_rtt_p50(samples: int = SAMPLES) -> float:
    """Median ms of a DEALER -> ROUTER -> DEALER round trip to another process (loopback)."""
    echo = subprocess.Popen(
        [sys.executable, "-m", "bench.floor", "zmq-echo"],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parent.parent,
    )
    ctx = zmq.Context()
    try:
        assert echo.stdout is not None
        port = int(echo.stdout.readline())
        dealer = ctx.socket(zmq.DEALER)
        dealer.linger = 0
        dealer.connect(f"tcp://127.0.0.1:{port}")
        times = []
        for n in range(samples + 20):
            t0 = time.perf_counter()
            dealer.send_multipart([b"id", PAYLOAD])
            dealer.recv_multipart()
            if n >= 20:  # the connection's first messages set it up
                times.append(time.perf_counter() - t0)
        dealer.close()
        return statistics.median(times) * 1000
    finally:
        echo.kill()
        echo.wait()
        ctx.term()


def _zmq_echo() -> None:
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    print(port, flush=True)
    while True:
        router.send_multipart(router.recv_multipart())


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _recv_record(sock: socket.socket) -> bytes:
    (size,) = _LEN.unpack(_recv_exact(sock, 4))
    return _recv_exact(sock, size)


def _listen() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    return server, server.getsockname()[1]


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _follower(directory: str) -> None:
    """Append each record with fdatasync, then answer one byte."""
    server, port = _listen()
    print(port, flush=True)
    conn, _ = server.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    appender = _Appender(Path(directory) / f"floor-follower-{port}")
    while True:
        appender.append(_recv_record(conn))
        conn.sendall(b"\x01")


def _leader(directory: str, port_a: str, port_b: str) -> None:
    """Forward each client record to both followers, append it with fdatasync, answer the
    client once its own write and one follower's are durable."""
    followers = [_connect(int(port_a)), _connect(int(port_b))]
    server, port = _listen()
    print(port, flush=True)
    conn, _ = server.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    appender = _Appender(Path(directory) / "floor-leader")
    acks = [0, 0]
    cond = threading.Condition()

    def reader(n: int) -> None:
        while followers[n].recv(1):
            with cond:
                acks[n] += 1
                cond.notify()

    for n in range(2):
        threading.Thread(target=reader, args=(n,), daemon=True).start()
    sent = 0
    while True:
        record = _recv_record(conn)
        framed = _LEN.pack(len(record)) + record
        for f in followers:
            f.sendall(framed)
        sent += 1
        appender.append(record)  # the leader's own fsync, overlapping the followers'
        with cond:
            cond.wait_for(lambda n=sent: max(acks) >= n)
        conn.sendall(b"\x01")


def tcp_three_times(directory: Path, samples: int = SAMPLES) -> tuple[float, float]:
    """Median and p99 ms of one replicated durable update through the minimal three-process
    system."""
    here = Path(__file__).resolve().parent.parent
    procs: list[subprocess.Popen[bytes]] = []
    try:

        def start(*args: str) -> int:
            proc = subprocess.Popen(
                [sys.executable, "-m", "bench.floor", *args], stdout=subprocess.PIPE, cwd=here
            )
            procs.append(proc)
            assert proc.stdout is not None
            return int(proc.stdout.readline())

        a = start("follower", str(directory))
        b = start("follower", str(directory))
        leader = _connect(start("leader", str(directory), str(a), str(b)))
        framed = _LEN.pack(len(PAYLOAD)) + PAYLOAD
        times = []
        for n in range(samples + 20):
            t0 = time.perf_counter()
            leader.sendall(framed)
            _recv_exact(leader, 1)
            if n >= 20:
                times.append(time.perf_counter() - t0)
        leader.close()
        return _p50_p99(times)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def measure(directory: Path) -> Floor:
    """All three floor figures, files in ``directory`` (a data directory's file system)."""
    fdatasync_ms, fdatasync_p99_ms = fdatasync_times(directory)
    zmq_rtt_ms = zmq_rtt_p50()
    tcp_three_ms, tcp_three_p99_ms = tcp_three_times(directory)
    return Floor(fdatasync_ms, zmq_rtt_ms, tcp_three_ms, fdatasync_p99_ms, tcp_three_p99_ms)


def text(floors: list[Floor]) -> str:
    """The floor line of a report: medians over rounds, and each round's figures."""

    def fig(key: str) -> str:
        values = [getattr(f, key) for f in floors]
        return f"{statistics.median(values):.3f} ms (" + " / ".join(
            f"{v:.3f}" for v in values
        ) + ")"

    return (
        "**The floor on this machine** (`bench/floor.py`, in this run, median -- and 99th "
        f"percentile where named -- of {SAMPLES} samples per round; rounds in brackets): "
        "fdatasync of 100 B on a "
        f"preallocated file in the data directory's file system {fig('fdatasync_ms')}, "
        f"p99 {fig('fdatasync_p99_ms')}; "
        f"ZeroMQ DEALER-ROUTER round trip between two processes {fig('zmq_rtt_ms')}; a "
        "minimal replicated write -- raw TCP, three processes, leader and follower "
        "fdatasync, majority ack, one update in flight -- p50 "
        f"{fig('tcp_three_ms')}, p99 {fig('tcp_three_p99_ms')}."
    )


def main(argv: list[str]) -> None:
    """``zmq-echo`` / ``follower DIR`` / ``leader DIR A B`` (helpers), else measure."""
    helpers: dict[str, Callable[..., None]] = {
        "zmq-echo": _zmq_echo, "follower": _follower, "leader": _leader
    }
    if argv and argv[0] in helpers:
        try:
            helpers[argv[0]](*argv[1:])
        except ConnectionError:  # the measuring side closed: the round is over
            return
    else:
        with tempfile.TemporaryDirectory(dir=argv[0] if argv else None) as tmp:
            print(text([measure(Path(tmp))]))


if __name__ == "__main__":
    main(sys.argv[1:])
