"""A reader that is draining a burst of multipart answers when the sender dies (run as a
script by ``test_reconnect_abort.py``: libzmq's abort ends the whole process).

``python reconnect_reader.py client|peer [--immediate]`` reads with the client's channel
(``DealerChannel``, its reader task) or a peer's (``PeerChannel``, the node's ``recv_frames``);
the sender, a ROUTER on loopback, sends ``BURST`` answers of ``FRAMES`` frames each and is
closed by a thread while the reader is still at them, so the reconnect's commands reach the
reading socket in the middle of a message (libzmq handles commands every 100 frames).
``--immediate`` is the negative control: every DEALER raftlog opens gets ``ZMQ_IMMEDIATE=1``,
as before the fix, and the run is expected to show the bug (below).

Prints ``read <n>`` (answers received whole; all ``BURST`` of them when the reader is sound)
and exits 0 -- unless libzmq aborts it, or (the peer's reader) the socket gets stuck reporting
a message it cannot deliver (``STUCK_EXIT``). With ``IMMEDIATE=1`` the client's reader shows
the bug as an abort or as fewer answers (pyzmq's ``Again`` ends its reader task).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from typing import Any

import zmq
import zmq.asyncio

from raftlog import sockets
from raftlog.client.dealer import DealerChannel, Waiters, next_delivery
from raftlog.rpc.messages import Peer, RequestVote
from raftlog.server.peers import PeerChannels
from raftlog.transport import recv_frames

BURST = 16
FRAMES = 50_000
MSG_ID = b"\x00\x00\x01"
STUCK_AFTER = 10_000
"""Wake-ups in a row on which the poll said the peer's DEALER was readable and nothing could
be read: the other way the bug shows (the socket's fair queue waits for the rest of a message
whose pipe is gone), a loop that would spin forever."""
STUCK_EXIT = 3
"""Exit code when the reader is stuck that way."""
CLIENT_CLOSE_AFTER = 0.05
"""Seconds between the client's reader starting on the burst and the sender's close: its
reading takes several times that, so the reader is in the middle of it when the sender dies
(the client's reader task reads the whole burst before the test's coroutine sees an answer)."""


def _with_immediate() -> None:
    """The negative control: raftlog's DEALERs as they were (``IMMEDIATE=1``)."""
    plain = sockets._socket

    def socket(context: Any, kind: int, *args: Any, **kwargs: Any) -> Any:
        sock = plain(context, kind, *args, **kwargs)
        if kind == zmq.DEALER:
            sock.setsockopt(zmq.IMMEDIATE, 1)
        return sock

    sockets._socket = socket


class Sender:
    """A ROUTER on loopback whose thread answers the first request with ``BURST`` answers
    (echoing its id frame), sets ``sent``, and closes the ROUTER ``close_after`` seconds
    after ``reading`` is set."""

    def __init__(self, close_after: float) -> None:
        self._close_after = close_after
        self.router: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 10_000)  # the close sends the whole burst first
        self.router.setsockopt(zmq.SNDHWM, 0)
        self.url = f"tcp://127.0.0.1:{self.router.bind_to_random_port('tcp://127.0.0.1')}"
        self.sent = threading.Event()
        self.reading = threading.Event()
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self) -> None:
        router = self.router
        try:
            if router.poll(10_000):
                routing_id, msg_id = router.recv_multipart()[:2]
                body = [b"x"] * (FRAMES - 1)
                for _ in range(BURST):
                    router.send_multipart([routing_id, msg_id, *body])
        finally:
            self.sent.set()
            self.reading.wait(30)
            time.sleep(self._close_after)
            router.close()

    def wait_sent(self) -> None:
        """Block until the burst is out, then give it time to reach the reader's socket
        (so the reader starts on a full queue and is in the middle of it when closed)."""
        assert self.sent.wait(30), "the burst was not sent"
        time.sleep(0.5)

    def stop(self) -> None:
        """Close (if not yet) and join."""
        self.sent.set()
        self.reading.set()
        self._thread.join()


def read_as_client() -> int:
    """Answers a ``DealerChannel`` delivers while its peer dies mid-burst."""
    sender = Sender(CLIENT_CLOSE_AFTER)

    async def main() -> int:
        context = zmq.asyncio.Context()
        waiters = Waiters()
        channel = DealerChannel(context, sender.url, waiters)
        got = 0
        try:
            with waiters.register(MSG_ID) as inbox:
                assert await channel.send([MSG_ID, b"ask"], 10.0), "the request did not go"
                sender.wait_sent()  # blocks the loop: the reader task starts on a full queue
                sender.reading.set()
                while (answer := await next_delivery(inbox, 1.0)) is not None:
                    assert len(answer.frames) == FRAMES, f"{len(answer.frames)} frames"
                    got += 1
        finally:
            sender.stop()
            await channel.aclose()
            context.term()
        return got

    return asyncio.run(main())


def read_as_peer() -> int:
    """Answers a peer's ``PeerChannel`` socket yields while the other peer dies mid-burst."""
    sender = Sender(0.0)
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    poller = zmq.Poller()
    channels = PeerChannels(context, "n1", b"ident", 1000, poller)
    channels.reconcile([Peer("n2", sender.url)])
    channel = channels.by_id["n2"]
    got = 0
    try:
        deadline = time.monotonic() + 10
        while not channel.link_up and time.monotonic() < deadline:
            for socket, _ in poller.poll(100):
                channels.read_link_events(socket)
        assert channel.link_up, "the link never came up"
        channel.send(RequestVote("n1", 1, 0, 0))
        sender.wait_sent()
        idle_wakeups = 0
        while polled := poller.poll(1000):  # as the node's loop: poll, then drain
            for socket, _ in polled:
                if channels.read_link_events(socket):
                    continue
                taken = 0
                while True:
                    try:
                        frames = recv_frames(socket)
                    except zmq.Again:
                        break
                    assert len(frames) == FRAMES, f"an answer of {len(frames)} frames"
                    taken += 1
                    got += 1
                    sender.reading.set()  # the compiled reader is fast: close at once
                idle_wakeups = 0 if taken else idle_wakeups + 1
                if idle_wakeups > STUCK_AFTER:
                    print(f"stuck after {got} answers", flush=True)
                    os._exit(STUCK_EXIT)
    finally:
        sender.stop()
        channels.close()
        context.term()
    return got


if __name__ == "__main__":
    if "--immediate" in sys.argv:
        _with_immediate()
    reader = read_as_peer if "peer" in sys.argv else read_as_client
    print(f"read {reader()}", flush=True)
