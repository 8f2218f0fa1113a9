"""ReplySender over a real in-process ROUTER: the bytes a client receives, and a dropped
reply counted instead of blocking the peer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import zmq

from raftlog import sockets, transport
from raftlog.metrics import PeerMetrics
from raftlog.rpc.messages import RequestUpdateResponse, UpdateStatus
from raftlog.server import replies as replies_module
from raftlog.server.replies import ReplySender

RID = bytes(range(12))


@pytest.fixture
def context() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    yield ctx
    ctx.term()


class Connected:
    """A peer's ROUTER, a client's DEALER, and the routing id of the client's one request."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]], name: str) -> None:
        self.router = sockets.peer_router(context, f"inproc://{name}", max_message_size=1 << 20)
        self.client = sockets.client_dealer(context, f"inproc://{name}")
        self.client.send_multipart([RID, b"=", b"ident", b"data"])
        assert self.router.poll(2000)
        self.routing = self.router.recv_multipart()[0]

    def received(self) -> list[bytes]:
        """The client's next answer."""
        assert self.client.poll(2000)
        return self.client.recv_multipart()


@pytest.fixture
def connected(context: zmq.Context[zmq.Socket[bytes]]) -> Iterator[Connected]:
    pair = Connected(context, "replies")
    yield pair
    pair.client.close(linger=0)
    pair.router.close(linger=0)


def test_the_client_receives_the_echoed_id_and_the_encoded_body(connected: Connected) -> None:
    metrics = PeerMetrics()
    sender = ReplySender(connected.router, metrics)
    sender.reply(connected.routing, RID, RequestUpdateResponse(RID, UpdateStatus.DONE, index=7))
    assert connected.received() == [RID, b"\x01", b"\x07"]
    assert metrics.replies_dropped.value == 0


def test_a_reply_the_router_cannot_queue_is_counted_not_waited_for(
    monkeypatch: pytest.MonkeyPatch, context: zmq.Context[zmq.Socket[bytes]]
) -> None:
    def full(*_args: object) -> None:
        raise zmq.Again()

    monkeypatch.setattr(replies_module, "send_routed", full)
    router = sockets.peer_router(context, "inproc://full", max_message_size=1 << 20)
    try:
        metrics = PeerMetrics()
        ReplySender(router, metrics).reply(
            b"gone", RID, RequestUpdateResponse(RID, UpdateStatus.EXPIRED)
        )
        assert metrics.replies_dropped.value == 1
    finally:
        router.close(linger=0)


def test_a_released_run_gets_what_update_done_sends_each_and_drops_are_counted(
    monkeypatch: pytest.MonkeyPatch, connected: Connected
) -> None:
    """``updates_done(first, waiters)``: the k-th waiter gets ``[true, first + k]`` exactly
    as ``update_done`` encodes it; a reply that cannot be queued is counted, and the rest
    still go out."""
    metrics = PeerMetrics()
    sender = ReplySender(connected.router, metrics)
    rids = [bytes([k]) * 12 for k in range(3)]
    waiters = [(connected.routing, rid, False) for rid in rids]
    sender.updates_done(300, waiters)
    got = [connected.received() for _ in rids]
    assert got == [[rid, b"\x01", b"\xcd" + (300 + k).to_bytes(2, "big")]
                   for k, rid in enumerate(rids)]
    sender.update_done(connected.routing, RID, 302)
    assert connected.received()[1:] == got[2][1:]
    real = transport.send_routed_py
    calls: list[bytes] = []

    def second_full(socket: zmq.Socket[bytes], to: bytes, rid: bytes, body: list[bytes]) -> None:
        calls.append(rid)
        if len(calls) == 2:
            raise zmq.Again()
        real(socket, to, rid, body)

    # the pure twin over a send that finds the second client's queue full (the compiled
    # twin's count is checked in tests/unit/test_transport_twins.py)
    monkeypatch.setattr(transport, "send_routed_py", second_full)
    monkeypatch.setattr(replies_module, "send_update_dones", transport.send_update_dones_py)
    sender.updates_done(400, waiters)
    assert calls == rids and metrics.replies_dropped.value == 1
    assert [connected.received()[0] for _ in range(2)] == [rids[0], rids[2]]
