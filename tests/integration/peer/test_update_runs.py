"""RequestUpdates taken in runs straight from the ROUTER (issue #28, ``RouterLimits.take_run``)
keep the arrival order on a real peer: a request that arrives after RequestUpdates on the same
connection is handled after they were proposed.

The witness is the order of the answers on one connection, sent to a follower: it answers
each RequestUpdate "not leader" when it proposes it (at the end of the run's batch) and a
RequestLogInfo when it handles it. So the answers to the updates sent before the
RequestLogInfo must all come before its answer, and the answer to the update after it must
come last. A drain that handled the RequestLogInfo before proposing the run queued ahead of
it would answer it first. Each burst is sent at once, so the updates and the request after
them mostly arrive in one drain, where the order is the drain's to keep."""

from __future__ import annotations

from pathlib import Path

import zmq

from integration.cluster import PeerCluster
from integration.peer.updates import new_request_id
from raftlog.rpc.messages import (
    TYPE_REQUEST_LOG_INFO,
    TYPE_REQUEST_UPDATE,
    RequestLogInfo,
    RequestLogInfoResponse,
    RequestUpdate,
    RequestUpdateResponse,
    UpdateStatus,
)
from raftlog.rpc.request_encoders import encode_request
from raftlog.rpc.response_decoders import decode_response

BURSTS = 40
INFO_ID = b"\x01"


def _answer_order(sock: zmq.Socket[bytes], count: int) -> list[bytes]:
    """The message ids of the next ``count`` answers, in the order they came."""
    order: list[bytes] = []
    while len(order) < count:
        assert sock.poll(20_000), f"answers missing: {len(order)} of {count}"
        frames = sock.recv_multipart()
        if frames[0] == INFO_ID:
            _, info = decode_response(TYPE_REQUEST_LOG_INFO, frames)
            assert isinstance(info, RequestLogInfoResponse)
            assert not info.is_leader
        else:
            _, answer = decode_response(TYPE_REQUEST_UPDATE, frames)
            assert isinstance(answer, RequestUpdateResponse)
            assert answer.status is UpdateStatus.NOT_LEADER, answer
        order.append(frames[0])
    return order


def test_a_request_after_a_run_of_updates_is_handled_after_they_were_proposed(
    tmp_path: Path,
) -> None:
    with PeerCluster(tmp_path) as cluster:
        cluster.start()
        leader = cluster.wait_stable_leader()
        follower = next(p for p in cluster.peers.values() if p.id != leader)
        ident = cluster.ident.encode()
        context = zmq.Context()
        sock = context.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(follower.url)
        try:
            for burst in range(BURSTS):
                before = [new_request_id() for _ in range(1 + burst % 5)]
                after = new_request_id()
                messages = [RequestUpdate(rid, b"b%d" % burst) for rid in before]
                for message in messages:
                    sock.send_multipart(encode_request(message, ident=ident))
                sock.send_multipart(encode_request(RequestLogInfo(), ident=ident, id=INFO_ID))
                last = RequestUpdate(after, b"a%d" % burst)
                sock.send_multipart(encode_request(last, ident=ident))
                order = _answer_order(sock, len(before) + 2)
                assert order == [*before, INFO_ID, after], burst
        finally:
            sock.close()
            context.term()
