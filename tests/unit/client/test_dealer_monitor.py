"""A client channel hears of its connection however fast it is made (loopback sockets).

The monitor must be attached before the DEALER connects: ZeroMQ sends monitor events only to
a monitor already attached, so a connection finished in the I/O thread before the monitor was
there went unnoticed, and a client talking to the wrong cluster was told "no connection could
be made" instead of "is the cluster ident right?" (seen on a busy CI machine)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import zmq
import zmq.asyncio

from raftlog import sockets
from raftlog.client.dealer import DealerChannel, Waiters


async def _connected_channel(url: str) -> bool:
    context = zmq.asyncio.Context()
    channel = DealerChannel(context, url, Waiters())
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10.0
        while not channel.state.ever_connected and loop.time() < deadline:
            await asyncio.sleep(0.01)
        return channel.state.ever_connected
    finally:
        await channel.aclose()
        context.term()


def test_a_connection_made_before_the_first_line_after_connect_is_still_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    attach = sockets.connection_monitor

    def slow_attach(sock: Any, *args: Any, **kwargs: Any) -> Any:
        # Give a connect already under way (the old order) all the time it needs to finish
        # before the monitor exists: a busy machine does the same by descheduling us here.
        time.sleep(0.3)
        return attach(sock, *args, **kwargs)

    monkeypatch.setattr(sockets, "connection_monitor", slow_attach)
    server = zmq.Context.instance().socket(zmq.ROUTER)
    server.setsockopt(zmq.LINGER, 0)
    try:
        port = server.bind_to_random_port("tcp://127.0.0.1")
        assert asyncio.run(_connected_channel(f"tcp://127.0.0.1:{port}"))
    finally:
        server.close()
