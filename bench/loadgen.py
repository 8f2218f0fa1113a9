"""A protocol-level load generator that drives any ØMQ RAFT cluster (ours or the reference).

It speaks the wire directly (``raftlog.rpc``) from one blocking DEALER driven by a poller, so
its own overhead is small and identical for both clusters: the comparison measures the
servers, not two different clients.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import zmq

from raftlog import sockets
from raftlog.ids import RequestIdGenerator
from raftlog.rpc.frames import decode_uint
from raftlog.rpc.messages import (
    EntriesStatus,
    RequestConfig,
    RequestConfigResponse,
    RequestEntries,
    RequestEntriesResponse,
    RequestUpdate,
    RequestUpdateResponse,
    UpdateStatus,
)
from raftlog.rpc.request_encoders import encode_request
from raftlog.rpc.response_decoders import decode_response
from raftlog.security.settings import CurveClient
from raftlog.transport import recv_frames, send_frames

_CTX = zmq.Context.instance()
T = TypeVar("T")


def find_leader(
    urls: list[str], ident: str, timeout: float = 20.0, curve: CurveClient | None = None
) -> str:
    """URL of the peer that says it leads (polling every peer until ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for url in urls:
            sock = sockets.client_dealer(_CTX, url, curve=curve)
            try:
                sock.send_multipart(
                    encode_request(RequestConfig(), ident=ident.encode(), id=b"\x01")
                )
                if sock.poll(300):
                    _, resp = decode_response(b"^", sock.recv_multipart())
                    if isinstance(resp, RequestConfigResponse) and resp.is_leader:
                        return url
            finally:
                sock.close(linger=0)
        time.sleep(0.05)
    raise RuntimeError(f"no leader among {urls}")


@dataclass(frozen=True)
class UpdateResult:
    ops: int
    seconds: float
    p50_ms: float
    p99_ms: float

    @property
    def rate(self) -> float:
        return self.ops / self.seconds


def run_updates(
    url: str,
    ident: str,
    *,
    inflight: int,
    total: int,
    size: int = 100,
    timeout: float = 60.0,
    curve: CurveClient | None = None,
) -> UpdateResult:
    """Commit ``total`` updates of ``size`` bytes keeping ``inflight`` outstanding."""
    ids = RequestIdGenerator()
    sock = sockets.client_dealer(_CTX, url, unbounded=True, curve=curve)
    ident_b = ident.encode()
    payload = b"p" * size
    started: dict[bytes, float] = {}
    latencies: list[float] = []
    sent = 0

    def send_one() -> None:
        nonlocal sent
        rid = ids.next()
        started[rid] = time.perf_counter()
        send_frames(sock, [rid, b"=", ident_b, payload])
        sent += 1

    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout
    try:
        for _ in range(min(inflight, total)):
            send_one()
        while len(latencies) < total:
            if not sock.poll(1000):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"stalled after {len(latencies)} of {total} updates")
                continue
            while True:
                try:
                    frames = recv_frames(sock)
                except zmq.Again:
                    break
                rid = frames[0]
                if len(frames) >= 3 and frames[1] == b"\x01":  # done: [rid, true, index]
                    begun = started.pop(rid, None)
                    if begun is None:
                        continue
                    latencies.append(time.perf_counter() - begun)
                    if sent < total:
                        send_one()
                elif len(frames) == 2 and frames[1] == b"":
                    raise RuntimeError("update expired")
                elif len(frames) >= 3 and frames[1] == b"":
                    raise RuntimeError(f"not leader any more: {frames[2]!r}")
        seconds = time.perf_counter() - t0
    finally:
        sock.close(linger=0)
    latencies.sort()
    return UpdateResult(
        total,
        seconds,
        statistics.median(latencies) * 1000,
        latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
    )


def update_once(urls: list[str], ident: str, timeout: float = 30.0) -> float:
    """Seconds until one update commits, trying peers in turn with the same request id."""
    rid = RequestIdGenerator().next()
    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout
    n = 0
    while time.monotonic() < deadline:
        url = urls[n % len(urls)]
        n += 1
        sock = sockets.client_dealer(_CTX, url)
        try:
            sock.send_multipart(
                encode_request(RequestUpdate(rid, b"failover"), ident=ident.encode())
            )
            while sock.poll(100):
                _, resp = decode_response(b"=", sock.recv_multipart())
                assert isinstance(resp, RequestUpdateResponse)
                if resp.status == UpdateStatus.DONE:
                    return time.perf_counter() - t0
                if resp.status != UpdateStatus.ACCEPTED:
                    break
        finally:
            sock.close(linger=0)
    raise RuntimeError("no update committed after the leader's kill")


def read_entries(
    url: str, ident: str, prev_index: int = 0, curve: CurveClient | None = None
) -> tuple[int, float]:
    """Stream every committed entry after ``prev_index``; returns (entries, seconds)."""
    sock = sockets.client_dealer(_CTX, url, curve=curve)
    ident_b = ident.encode()
    count = 0
    t0 = time.perf_counter()
    try:
        sock.send_multipart(encode_request(RequestEntries(prev_index), ident=ident_b, id=b"\x05"))
        while True:
            if not sock.poll(10_000):
                raise RuntimeError(f"RequestEntries stalled after {count} entries")
            frames = recv_frames(sock)
            status = decode_uint(frames[1], 1)
            if status == EntriesStatus.NOT_LEADER:
                _, resp = decode_response(b"<", frames)
                assert isinstance(resp, RequestEntriesResponse)
                raise RuntimeError(f"not leader: {resp.leader_id}")
            count += len(frames) - 4
            if status == EntriesStatus.LAST:
                break
            sock.send_multipart([b"\x05", b"<", ident_b, frames[3]])
    finally:
        sock.close(linger=0)
    return count, time.perf_counter() - t0


def on_leader_retrying(
    urls: list[str], ident: str, run: Callable[[str], T], notes: list[str], what: str
) -> T:
    """``run(leader_url)``, retried (up to twice) on the new leader when an election cuts it
    short; each cut is appended to ``notes`` so the report can say so. Why: on a loaded
    shared machine a cluster (either one) occasionally changes leader mid-run, which says
    nothing about the throughput being measured but would abort the whole benchmark."""
    for attempt in range(3):
        leader = find_leader(urls, ident, timeout=60)
        try:
            return run(leader)
        except RuntimeError as exc:
            notes.append(f"{what}: {exc}")
            if attempt == 2:
                raise
    raise AssertionError("unreachable")
