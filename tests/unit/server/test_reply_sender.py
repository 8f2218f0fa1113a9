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


def test_the_client_receives_the_echoed_id_and_the_encoded_body(
    context: zmq.Context[zmq.Socket[bytes]],
) -> None:
    router = sockets.peer_router(context, "inproc://replies", max_message_size=1 << 20)
    client = sockets.client_dealer(context, "inproc://replies")
    try:
        client.send_multipart([RID, b"=", b"ident", b"data"])
        assert router.poll(2000)
        routing = router.recv_multipart()[0]
        metrics = PeerMetrics()
        sender = ReplySender(router, metrics)
        sender.reply(routing, RID, RequestUpdateResponse(RID, UpdateStatus.DONE, index=7))
        assert client.poll(2000)
        assert client.recv_multipart() == [RID, b"\x01", b"\x07"]
        assert metrics.replies_dropped.value == 0
    finally:
        client.close(linger=0)
        router.close(linger=0)


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
    monkeypatch: pytest.MonkeyPatch, context: zmq.Context[zmq.Socket[bytes]]
) -> None:
    """``updates_done(first, waiters)``: the k-th waiter gets ``[true, first + k]`` exactly
    as ``update_done`` encodes it; a reply that cannot be queued is counted, and the rest
    still go out."""
    router = sockets.peer_router(context, "inproc://run", max_message_size=1 << 20)
    client = sockets.client_dealer(context, "inproc://run")
    try:
        client.send_multipart([RID, b"=", b"ident", b"data"])
        assert router.poll(2000)
        routing = router.recv_multipart()[0]
        metrics = PeerMetrics()
        sender = ReplySender(router, metrics)
        rids = [bytes([k]) * 12 for k in range(3)]
        sender.updates_done(300, [(routing, rid, False) for rid in rids])
        got = []
        for _ in rids:
            assert client.poll(2000)
            got.append(client.recv_multipart())
        sender.update_done(routing, RID, 302)
        assert client.poll(2000)
        single = client.recv_multipart()
        assert got == [[rid, b"\x01", b"\xcd" + (300 + k).to_bytes(2, "big")]
                       for k, rid in enumerate(rids)]
        assert single[1:] == got[2][1:]
        real = transport.send_routed
        calls: list[bytes] = []

        def second_full(
            socket: zmq.Socket[bytes], to: bytes, rid: bytes, body: list[bytes]
        ) -> None:
            calls.append(rid)
            if len(calls) == 2:
                raise zmq.Again()
            real(socket, to, rid, body)

        monkeypatch.setattr(replies_module, "send_routed", second_full)
        sender.updates_done(400, [(routing, rid, False) for rid in rids])
        assert calls == rids and metrics.replies_dropped.value == 1
        received = []
        for _ in range(2):
            assert client.poll(2000)
            received.append(client.recv_multipart()[0])
        assert received == [rids[0], rids[2]]
    finally:
        client.close(linger=0)
        router.close(linger=0)
