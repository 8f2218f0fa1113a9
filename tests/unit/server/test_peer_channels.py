"""PeerChannels over real in-process sockets: reconciliation, msgids, retransmissions and
response matching (docs/protocol.md §6)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import zmq

from raftlog import sockets
from raftlog.errors import RemoteProtocolError
from raftlog.rpc.codec import decode_request
from raftlog.rpc.frames import decode_msg_id
from raftlog.rpc.messages import Peer, RequestVote, RequestVoteResponse
from raftlog.rpc.responses import encode_reply
from raftlog.server import peers as peers_module
from raftlog.server.peers import PeerChannels

IDENT = b"cluster"


@pytest.fixture
def context() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    yield ctx
    ctx.term()


class Setup:
    def __init__(self, context: zmq.Context[zmq.Socket[bytes]]) -> None:
        self.router = sockets.peer_router(context, "inproc://n2", max_message_size=1 << 20)
        self.poller = zmq.Poller()
        self.channels = PeerChannels(context, "n1", IDENT, 50, self.poller)

    def receive(self) -> list[bytes]:
        assert self.router.poll(2000), "nothing arrived"
        return self.router.recv_multipart()

    def close(self) -> None:
        self.channels.close()
        self.router.close(linger=0)


def test_reconcile_connects_others_drops_the_removed_and_reconnects_moved_peers(
    context: zmq.Context[zmq.Socket[bytes]],
) -> None:
    s = Setup(context)
    try:
        s.channels.reconcile([Peer("n1", "inproc://n1"), Peer("n2", "inproc://n2")])
        assert list(s.channels.by_id) == ["n2"] and len(s.channels.by_socket) == 1
        first = s.channels.by_id["n2"]
        s.channels.reconcile([Peer("n1", "inproc://n1"), Peer("n2", "inproc://n2-moved")])
        assert s.channels.by_id["n2"] is not first
        s.channels.reconcile([Peer("n1", "inproc://n1")])
        assert s.channels.by_id == {} and s.channels.by_socket == {}
        assert not s.channels.send("n2", RequestVote("n1", 1, 0, 0))
    finally:
        s.close()


def test_requests_get_new_msgids_and_retransmissions_keep_theirs(
    context: zmq.Context[zmq.Socket[bytes]],
) -> None:
    s = Setup(context)
    try:
        s.channels.reconcile([Peer("n2", "inproc://n2")])
        vote = RequestVote("n1", 2, 0, 0)
        s.channels.send("n2", vote)
        s.channels.send("n2", vote)  # the same object again: a retransmission
        s.channels.send("n2", RequestVote("n1", 3, 0, 0))
        got = [s.receive() for _ in range(3)]
        ids = [decode_msg_id(frames[1]) for frames in got]
        assert ids[0] == ids[1] and ids[2] != ids[0]
        decoded = decode_request(got[0][1:])
        assert (decoded.message, decoded.ident) == (vote, IDENT)
        channel = s.channels.by_id["n2"]
        answer = encode_reply(got[2][1], RequestVoteResponse(3, True))
        assert channel.receive(answer) == (RequestVote("n1", 3, 0, 0), RequestVoteResponse(3, True))
        assert channel.receive(answer) is None  # answered already
        channel.cancel_all()
        assert channel.receive(encode_reply(got[0][1], RequestVoteResponse(2, True))) is None
        with pytest.raises(RemoteProtocolError):
            channel.receive([])
    finally:
        s.close()


def test_outstanding_requests_are_bounded(
    context: zmq.Context[zmq.Socket[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(peers_module, "MAX_OUTSTANDING", 3)
    s = Setup(context)
    try:
        s.channels.reconcile([Peer("n2", "inproc://n2")])
        votes = [RequestVote("n1", term, 0, 0) for term in range(1, 6)]
        for vote in votes:
            s.channels.send("n2", vote)
        got = [s.receive() for _ in votes]
        channel = s.channels.by_id["n2"]
        oldest = encode_reply(got[0][1], RequestVoteResponse(1, True))
        assert channel.receive(oldest) is None  # forgotten: beyond the bound
        newest = encode_reply(got[4][1], RequestVoteResponse(5, True))
        assert channel.receive(newest) == (votes[4], RequestVoteResponse(5, True))
    finally:
        s.close()
