"""A ROUTER and a DEALER on loopback TCP: the real sockets the transport tests run on."""

from __future__ import annotations

import zmq


class Pair:
    """A ROUTER bound on an ephemeral loopback port and a DEALER connected to it."""

    def __init__(self) -> None:
        self.ctx = zmq.Context()
        self.router = self.ctx.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        port = self.router.bind_to_random_port("tcp://127.0.0.1")
        self.dealer = self.ctx.socket(zmq.DEALER)
        self.dealer.setsockopt(zmq.LINGER, 0)
        self.dealer.connect(f"tcp://127.0.0.1:{port}")

    def arrive(self, frames: list[bytes]) -> None:
        """Send ``frames`` from the DEALER and wait until the ROUTER has them queued."""
        self.dealer.send_multipart(frames)
        assert self.router.poll(10_000), "message did not arrive"

    def close(self) -> None:
        self.router.close()
        self.dealer.close()
        self.ctx.term()
