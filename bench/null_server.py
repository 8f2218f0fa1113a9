"""A server that does (almost) no work, to measure the ceiling of a client on this machine.

Why: ``make bench BENCH=cluster`` compares raftlog with the reference using the reference's
own Node client, and that client costs CPU of its own on the same 2 cores. How fast can it
go at all? This process answers it: it speaks just enough of the wire (docs/protocol.md) to
serve that client -- RequestConfig (it is the leader of a one-peer cluster), RequestUpdate
(DONE at once, with the next index: no log, no fsync, no replication) and RequestEntries
(pre-built batches of 100 B entries from memory, a window of ``WINDOW`` unacknowledged
batches as the real servers keep) -- so the rate the client reaches against it is the most
any server could get out of that client here. Batches go out with raftlog's own send path
(``transport.send_routed``): pyzmq's ``send_multipart`` took ~1.0 µs per frame against
0.16 µs (minimum of 10, 1,073-frame messages, 2026-11-24), so the null server was slower
per entry than raftlog's leader and its "ceiling" for reads was lower than what the leader
reached.

Run as ``python -m bench.null_server ENTRIES BATCH PORT``: it prints its URL on one line,
then serves until its standard input closes. Not a raftlog peer and never used outside benchmarks.
"""

from __future__ import annotations

import os
import sys
import threading

import zmq

from raftlog import sockets
from raftlog.entry import LogEntry
from raftlog.rpc.codec import decode_request
from raftlog.rpc.messages import (
    EntriesStatus,
    Peer,
    RequestConfig,
    RequestConfigResponse,
    RequestEntries,
    RequestEntriesResponse,
    RequestUpdate,
    RequestUpdateResponse,
    UpdateStatus,
)
from raftlog.rpc.responses import encode_reply_body, encode_response
from raftlog.transport import recv_frames, send_routed

WINDOW = 5
"""Unacknowledged RequestEntries batches per stream (the reference's requestEntriesPipelines)."""


def _batches(entries: int, batch: int) -> dict[int, list[bytes]]:
    """Every RequestEntries answer, encoded once: first index - 1 -> frames after the id."""
    entry = LogEntry(os.urandom(12), 0, 1, b"p" * 100).to_bytes()
    out: dict[int, list[bytes]] = {}
    for sent in range(0, entries, batch):
        last = min(sent + batch, entries)
        status = EntriesStatus.LAST if last == entries else EntriesStatus.MORE
        answer = RequestEntriesResponse(
            status, last_index=last, raw_entries=[entry] * (last - sent)
        )
        out[sent] = encode_response(answer, id=b"")[1:]
    return out


class _NullServer:
    """The state of one null server: the pre-built batches, the open streams, the index."""

    def __init__(self, sock: zmq.Socket[bytes], url: str, entries: int, batch: int) -> None:
        self.sock, self.entries, self.batch = sock, entries, batch
        self.prebuilt = _batches(entries, batch)
        self.streams: dict[tuple[bytes, bytes], int] = {}
        self.index = 0
        self.config = RequestConfigResponse(True, "1", (Peer("1", url),))

    def serve(self) -> None:
        """Answer requests until the socket is closed."""
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        while True:
            try:
                poller.poll()
                while True:  # drain what is queued, as a peer's loop does
                    self.answer(recv_frames(self.sock))
            except zmq.Again:
                continue
            except zmq.ZMQError:
                return

    def answer(self, frames: list[bytes]) -> None:
        """Answer one request."""
        sock, routing = self.sock, frames[0]
        req = decode_request(frames[1:])
        m = req.message
        if isinstance(m, RequestUpdate):
            self.index += 1
            done = RequestUpdateResponse(m.request_id, UpdateStatus.DONE, index=self.index)
            send_routed(sock, routing, req.id, encode_reply_body(done))
        elif isinstance(m, RequestEntries):
            key = (routing, req.id)
            sent = self.streams.setdefault(key, m.prev_index)
            while sent < self.entries and (sent - m.prev_index) // self.batch < WINDOW:
                send_routed(sock, routing, req.id, self.prebuilt[sent])
                sent = min(sent + self.batch, self.entries)
            self.streams[key] = sent
        elif isinstance(m, RequestConfig):
            sock.send_multipart([routing, *encode_response(self.config, id=req.id)])


def main(argv: list[str]) -> int:
    entries, batch = int(argv[0]), int(argv[1])
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    url = f"tcp://127.0.0.1:{int(argv[2])}"
    sock = sockets.peer_router(ctx, url, max_message_size=-1)  # -1: no limit (0 refuses all)
    threading.Thread(target=_NullServer(sock, url, entries, batch).serve, daemon=True).start()
    print(url, flush=True)
    sys.stdin.read()  # until the benchmark closes our standard input
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
