"""Read consistency on the wire and on the peer (issue #29): RequestEntries frames 8-9, the
``RI`` answer, the ``TR`` body keys, and ``ConsistentReads`` holding, serving and refusing."""

from __future__ import annotations

import pytest

from raftlog.consensus import ReadIndexFailed, ReadIndexReady
from raftlog.errors import RemoteProtocolError
from raftlog.rpc.codec import decode_request
from raftlog.rpc.messages import ClientDispatch, ClientDispatchResponse, RequestEntries
from raftlog.rpc.reads import Consistency, decode_read_index_answer, encode_read_index_answer
from raftlog.rpc.request_encoders import encode_request
from raftlog.server.consistent_reads import ConsistentReads
from raftlog.topics import wire as rpc
from raftlog.topics.wire_reads import encode_not_served, not_served_leader, read_level, with_level


@pytest.mark.parametrize(
    "message",
    [
        RequestEntries(299, None, 0, False, 300, False),
        RequestEntries(299, 10, 0, True, 0, True),
        RequestEntries(0, 5, 7, True, 2**40, True),
    ],
)
def test_request_entries_levels_round_trip(message: RequestEntries) -> None:
    frames = encode_request(message, ident=b"i", id=b"\x01")
    assert len(frames) == 9  # frames 5-9 always go together
    assert decode_request(frames).message == message


def test_a_plain_request_entries_is_unchanged() -> None:
    """``any``: byte for byte what a reference peer always got."""
    assert encode_request(RequestEntries(5, 3), ident=b"i", id=b"\x01")[3:] == [b"\x05", b"\x03"]


def test_read_index_answers() -> None:
    assert decode_read_index_answer([b"\x01", *encode_read_index_answer(77)]) == 77
    assert decode_read_index_answer([b"", b"n2"]) == "n2"
    assert decode_read_index_answer([b"", b""]) is None
    with pytest.raises(RemoteProtocolError):
        decode_read_index_answer([b"\x02"])


def test_consistency_names() -> None:
    assert Consistency.parse("linearizable") is Consistency.LINEARIZABLE
    with pytest.raises(ValueError, match="read_your_writes"):
        Consistency.parse("strong")


def test_tr_levels_are_added_and_taken_off() -> None:
    plain = rpc.encode_read_request(rpc.ReadRequest("t", from_index=3))
    assert with_level(plain, min_index=0, linearizable=False) == plain
    asked = with_level(plain, min_index=9, linearizable=True)
    level = read_level(ClientDispatch(rpc.TYPE_READ, tuple(asked)))
    assert level is not None
    min_index, linearizable, stripped = level
    assert (min_index, linearizable) == (9, True)
    assert rpc.decode_read_request(stripped.args) == rpc.decode_read_request(plain)
    assert read_level(ClientDispatch(rpc.TYPE_READ, tuple(plain))) is None
    bad = with_level(plain, min_index=0, linearizable=True)
    bad_body = bad[0].replace(b"\xc3", b"\x01")  # linearizable: 1 instead of true
    assert read_level(ClientDispatch(rpc.TYPE_READ, (bad_body,))) is None
    assert not_served_leader(encode_not_served("n1")) == (True, "n1")
    assert not_served_leader(encode_not_served(None)) == (True, None)


class FakeCore:
    def __init__(self, leads: bool) -> None:
        self.leads = leads
        self.leader_id: str | None = "n1"
        self.queued: list[object] = []

    def read_index(self, context: object) -> bool:
        if self.leads:
            self.queued.append(context)
        return self.leads


class FakeMachine:
    last_applied = 5


class Replies:
    def __init__(self) -> None:
        self.sent: list[tuple[bytes, bytes, object]] = []

    def reply(self, routing: bytes, msg_id: bytes, message: object) -> None:
        self.sent.append((routing, msg_id, message))


def _reads(leads: bool) -> tuple[ConsistentReads, FakeCore, FakeMachine, Replies, list[float]]:
    core, machine, replies, now = FakeCore(leads), FakeMachine(), Replies(), [0.0]
    reads = ConsistentReads(core, machine, replies, clock=lambda: now[0])
    return reads, core, machine, replies, now


def test_a_minimum_index_waits_for_apply_or_is_refused() -> None:
    reads, _core, machine, _replies, now = _reads(False)
    log: list[object] = []
    reads.gate(min_index=3, linearizable=False, serve=lambda: log.append("now"), refuse=log.append)
    reads.gate(min_index=8, linearizable=False, serve=lambda: log.append("8"), refuse=log.append)
    reads.gate(min_index=20, linearizable=False, serve=lambda: log.append("20"), refuse=log.append)
    assert log == ["now"] and reads.waiting == 2
    machine.last_applied = 8
    reads.on_applied(8)
    assert log == ["now", "8"]
    now[0] = 10.0
    reads.sweep(now[0])
    assert log == ["now", "8", "n1"] and reads.waiting == 0  # refused, naming the leader


def test_linearizable_waits_for_the_core_then_for_apply() -> None:
    reads, core, machine, _replies, _now = _reads(True)
    log: list[object] = []
    reads.gate(min_index=0, linearizable=True, serve=lambda: log.append("served"),
               refuse=log.append)
    reads.gate(min_index=0, linearizable=True, serve=lambda: log.append("other"),
               refuse=log.append)
    assert log == [] and len(core.queued) == 2
    assert reads.on_event(ReadIndexReady(core.queued[0], 7))
    assert log == []  # confirmed at 7, applied 5: waits
    machine.last_applied = 7
    reads.on_applied(7)
    assert log == ["served"]
    assert reads.on_event(ReadIndexFailed(core.queued[1], "n3"))
    assert log == ["served", "n3"]


def test_ri_on_a_follower_is_refused_with_the_leader() -> None:
    reads, _core, _machine, replies, _now = _reads(False)
    reads.request_read_index(b"r", b"\x01", ClientDispatch(b"RI"))
    (_, _, answer), = replies.sent
    assert isinstance(answer, ClientDispatchResponse)
    assert decode_read_index_answer(list(answer.frames)) == "n1"


def test_a_confirmation_that_never_comes_is_refused_after_the_wait() -> None:
    """A leader cut off from its followers (no check-quorum) keeps believing it leads: the
    client is refused after the wait, and the core's late answer is ignored."""
    reads, core, _machine, _replies, now = _reads(True)
    log: list[object] = []
    reads.gate(min_index=0, linearizable=True, serve=lambda: log.append("served"),
               refuse=log.append)
    now[0] = 1.0
    reads.sweep(now[0])
    assert log == [] and reads.waiting == 1
    now[0] = 5.0
    reads.sweep(now[0])
    assert log == ["n1"] and reads.waiting == 0
    assert reads.on_event(ReadIndexReady(core.queued[0], 3))
    assert log == ["n1"]


def test_a_follower_asks_the_leader_and_never_forwards_an_ri() -> None:
    """A read served on a follower gets its read index from the leader (``RI`` over the peer
    channel); an ``RI`` a follower receives is refused, never passed on (no chains)."""
    core, machine, replies, now = FakeCore(False), FakeMachine(), Replies(), [0.0]
    asked: list[tuple[str, bytes, object]] = []

    def ask(peer: str, msg_type: bytes, args: object, answer: object) -> bool:
        asked.append((peer, msg_type, answer))
        return True

    reads = ConsistentReads(core, machine, replies, clock=lambda: now[0], ask=ask)
    log: list[object] = []
    reads.gate(min_index=0, linearizable=True, serve=lambda: log.append("served"),
               refuse=log.append)
    reads.gate(min_index=0, linearizable=True, serve=lambda: log.append("again"),
               refuse=log.append)
    (peer, msg_type, first), (_, _, second) = asked
    assert (peer, msg_type) == ("n1", b"RI") and callable(first) and callable(second)
    first([b"\x01", *encode_read_index_answer(9)])  # confirmed at 9: applied is 5
    assert log == []
    machine.last_applied = 9
    reads.on_applied(9)
    assert log == ["served"]
    second([b"", b"n3"])  # the peer it asked does not lead either
    assert log == ["served", "n3"]
    reads.request_read_index(b"r", b"\x02", ClientDispatch(b"RI"))
    assert len(asked) == 2 and decode_read_index_answer(list(replies.sent[-1][2].frames)) == "n1"  # type: ignore[attr-defined]
