"""The compiled transport twins (raftlog/_speedups_transport.c) against their pure-Python
definitions in raftlog/transport.py, on real ZeroMQ sockets over loopback TCP.

Each test sends the same messages twice, once for each twin, and compares what comes out:
frames, the metadata of the connection, what ``taken`` is told, the per-message limit, and
the errors (``zmq.Again`` when nothing is queued or no peer can take a message, ENOTSOCK on
a closed socket). Without the extension these tests skip and say so, except under
``RAFTLOG_EXPECT_COMPILED=1`` (CI), where ``test_ci_runs_the_compiled_twins`` fails instead.
"""

from __future__ import annotations

import errno
import os
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import msgpack
import pytest
import zmq
from hypothesis import given, settings
from hypothesis import strategies as st
from zmq_pair import Pair

from raftlog import speedups, transport
from raftlog.rpc.responses import encode_update_done
from raftlog.transport import MessageTooLargeError

pytestmark = pytest.mark.skipif(
    speedups.transport is None and os.environ.get("RAFTLOG_EXPECT_COMPILED") != "1",
    reason=f"the compiled twins are not in use here: {speedups.IMPLEMENTATION}",
)

RecvBounded = Callable[..., tuple[list[bytes], str | None]]
TWINS_RECV_BOUNDED: dict[str, RecvBounded] = {
    "pure": transport.recv_bounded_py,
    "compiled": transport.recv_bounded,
}


@pytest.fixture
def pair() -> Iterator[Pair]:
    p = Pair()
    yield p
    p.close()


def test_the_compiled_twins_are_the_ones_in_use() -> None:
    assert transport.recv_bounded is not transport.recv_bounded_py
    assert transport.send_frames is not transport.send_frames_py


frames_strategy = st.lists(st.binary(max_size=300), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(frames=frames_strategy)
def test_recv_frames_gives_the_same_frames(frames: list[bytes]) -> None:
    p = Pair()
    try:
        got = []
        for recv in (transport.recv_frames_py, transport.recv_frames):
            p.arrive(frames)
            got.append(recv(p.router))
        assert got[0] == got[1]
        assert got[0][1:] == frames  # after the routing id
    finally:
        p.close()


def _bounded(recv: RecvBounded, p: Pair, limit: int, **kw: Any) -> tuple[object, list[tuple]]:
    told: list[tuple[int, int, int]] = []
    try:
        out: object = recv(p.router, limit, taken=lambda *a: told.append(a), **kw)
    except MessageTooLargeError as exc:
        out = ("too large", exc.head, exc.size, exc.user)
    return out, told


@settings(max_examples=60, deadline=None)
@given(frames=frames_strategy, limit=st.integers(-2, 1500))
def test_recv_bounded_gives_the_same_frames_limit_and_accounting(
    frames: list[bytes], limit: int
) -> None:
    p = Pair()
    try:
        results = []
        for recv in TWINS_RECV_BOUNDED.values():
            p.arrive(frames)
            results.append(_bounded(recv, p, limit, with_user=False))
        assert results[0] == results[1]
        (out, told) = results[0]
        assert told[0][1:] == (sum(map(len, frames)), len(frames) + 1)
        assert told[0][0] > 0  # the TCP connection's descriptor
        too_large = sum(map(len, frames)) > limit
        assert (isinstance(out, tuple) and out[0] == "too large") == too_large
        # the socket is at a message boundary afterwards: the next message comes whole
        for recv in TWINS_RECV_BOUNDED.values():
            p.arrive([b"next"])
            assert recv(p.router, 10, with_user=False)[0][1:] == [b"next"]
    finally:
        p.close()


def test_recv_bounded_metadata(pair: Pair) -> None:
    for with_user, with_address, user in ((False, True, "127.0.0.1"), (True, False, None)):
        for recv in TWINS_RECV_BOUNDED.values():
            pair.arrive([b"a", b"b"])
            frames, got = recv(
                pair.router, 100, with_user=with_user, with_address=with_address
            )
            assert (frames[1:], got) == ([b"a", b"b"], user)


def test_nothing_queued_is_again_for_every_twin(pair: Pair) -> None:
    for recv in (transport.recv_frames_py, transport.recv_frames):
        with pytest.raises(zmq.Again):
            recv(pair.router)
    for bounded in TWINS_RECV_BOUNDED.values():
        with pytest.raises(zmq.Again):
            bounded(pair.router, 100, with_user=False)


def test_again_does_not_grow_a_traceback(pair: Pair) -> None:
    """The compiled twin raises one shared ``zmq.Again``; its traceback is reset each time."""
    depth = []
    for _ in range(200):
        try:
            transport.recv_frames(pair.router)
        except zmq.Again as exc:
            depth.append(len(traceback.extract_tb(exc.__traceback__)))
    assert max(depth) <= 3, depth[-5:]


def test_a_closed_socket_is_an_error_not_a_crash() -> None:
    p = Pair()
    sock = p.router
    sock.close()
    for recv in (transport.recv_frames_py, transport.recv_frames):
        with pytest.raises(zmq.ZMQError) as info:
            recv(sock)
        assert info.value.errno == errno.ENOTSOCK
    with pytest.raises(zmq.ZMQError) as info:
        transport.send_frames(sock, [b"x"])
    assert info.value.errno == errno.ENOTSOCK
    p.dealer.close()
    p.ctx.term()


def test_send_twins_put_the_same_bytes_on_the_wire(pair: Pair) -> None:
    routing = None
    for send in (transport.send_frames_py, transport.send_frames):
        send(pair.dealer, [b"hello", b"", b"x" * 5000])
        assert pair.router.poll(10_000)
        got = pair.router.recv_multipart()
        routing = got[0]
        assert got[1:] == [b"hello", b"", b"x" * 5000]
    assert routing is not None
    for send_routed in (transport.send_routed_py, transport.send_routed):
        for body in ([], [b"a"], [b"a", b"b", b"c"]):
            send_routed(pair.router, routing, b"\x07", body)
            assert pair.dealer.poll(10_000)
            assert pair.dealer.recv_multipart() == [b"\x07", *body]


def test_send_without_a_peer_is_again(pair: Pair) -> None:
    lonely = pair.ctx.socket(zmq.DEALER)  # no connection: nowhere to queue a message
    lonely.setsockopt(zmq.LINGER, 0)
    try:
        for send in (transport.send_frames_py, transport.send_frames):
            with pytest.raises(zmq.Again):
                send(lonely, [b"x", b"y"])
        for send_routed in (transport.send_routed_py, transport.send_routed):
            with pytest.raises(zmq.Again):
                send_routed(lonely, b"r", b"\x01", [b"x"])
    finally:
        lonely.close()


def test_wrong_frame_types_are_errors(pair: Pair) -> None:
    for send in (transport.send_frames_py, transport.send_frames):
        with pytest.raises(TypeError):
            send(pair.dealer, ["text"])  # type: ignore[list-item]


TWINS_UPDATE_DONES = {
    "pure": transport.send_update_dones_py,
    "compiled": transport.send_update_dones,
}
EDGES = [0, 1, 126, 127, 128, 254, 255, 256, 65534, 65535, 65536, 2**31 - 3, 2**31 - 1, 2**31]
"""Indexes on and around each of msgpack's integer forms, and where the compiled twin stops
writing the body itself (2**31 - 1) and calls ``encode``."""


def _routing_of(pair: Pair) -> bytes:
    pair.dealer.send(b"hello")
    assert pair.router.poll(10_000)
    return pair.router.recv_multipart()[0]


@pytest.mark.parametrize("twin", TWINS_UPDATE_DONES)
def test_update_dones_put_the_bytes_of_each_answer_sent_alone(pair: Pair, twin: str) -> None:
    send_dones = TWINS_UPDATE_DONES[twin]
    routing = _routing_of(pair)
    encoded: list[int] = []

    def encode(index: int) -> list[bytes]:
        encoded.append(index)
        return encode_update_done(index)

    for first in [*EDGES, 2**53 - 3]:
        waiters = [(routing, bytes([k]) * 16, False) for k in range(3)]
        assert send_dones(pair.router, first, waiters, encode) == 0
        for k in range(3):
            assert pair.dealer.poll(10_000)
            assert pair.dealer.recv_multipart() == [bytes([k]) * 16, *encode_update_done(first + k)]
    if twin == "compiled":  # the body is written in C up to 2**31 - 1, encode() only beyond
        assert min(encoded) == 2**31
    assert not pair.dealer.poll(0)


def test_update_dones_bodies_are_msgpack_of_the_index(pair: Pair) -> None:
    """The C body is pinned to the encoder above; this pins the encoder to msgpack itself:
    an int up to 2**31 - 1, a float64 beyond (what the reference reads, docs/protocol.md)."""
    for index in EDGES[:-1]:
        assert encode_update_done(index) == [b"\x01", msgpack.packb(index)]
    assert encode_update_done(2**31) == [b"\x01", msgpack.packb(float(2**31))]


@pytest.mark.parametrize("twin", TWINS_UPDATE_DONES)
def test_update_dones_count_what_the_router_cannot_queue(pair: Pair, twin: str) -> None:
    send_dones = TWINS_UPDATE_DONES[twin]
    lonely = pair.ctx.socket(zmq.DEALER)  # no connection: every answer is zmq.Again
    lonely.setsockopt(zmq.LINGER, 0)
    try:
        waiters = [(b"r", b"\x01" * 16, False)] * 4
        assert send_dones(lonely, 7, waiters, encode_update_done) == 4
        assert send_dones(lonely, 2**31, waiters[:2], encode_update_done) == 2
        assert send_dones(lonely, 7, [], encode_update_done) == 0
    finally:
        lonely.close()


@pytest.mark.parametrize("twin", TWINS_UPDATE_DONES)
def test_update_dones_refuse_bad_arguments(pair: Pair, twin: str) -> None:
    send_dones = TWINS_UPDATE_DONES[twin]
    with pytest.raises(ValueError, match="negative"):
        send_dones(pair.router, -1, [(b"r", b"i", False)], encode_update_done)
    with pytest.raises(TypeError):
        send_dones(pair.router, 1, [None], encode_update_done)  # type: ignore[list-item]
    with pytest.raises(TypeError):
        send_dones(pair.router, 1, [("text", b"i", False)], encode_update_done)  # type: ignore[list-item]
