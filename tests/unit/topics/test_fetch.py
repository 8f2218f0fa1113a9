"""``TF`` push fetch (issue #27): thresholds, the byte credit, the codec, and parking until
the thresholds are met."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from raftlog.errors import TopicError
from raftlog.rpc.messages import ClientDispatch
from raftlog.server.parked_reads import ParkedReads, parkable
from raftlog.topics import wire as rpc
from raftlog.topics.records import LoggedRecord, Record, RecordId
from raftlog.topics.wire_fetch import (
    TYPE_FETCH,
    FetchRequest,
    decode_fetch_request,
    encode_fetch_request,
)


def result(*sizes: int) -> rpc.ReadResult:
    items = tuple(LoggedRecord(RecordId(i + 1, 0), 0, Record("t", b"x" * n))
                  for i, n in enumerate(sizes))
    return rpc.ReadResult(items, 9, True, False)


def test_codec_round_trip_and_bad_values() -> None:
    req = FetchRequest(rpc.ReadRequest("t", 5, 0, wait_ms=100), 3, 1000, 4096)
    assert decode_fetch_request(encode_fetch_request(req)) == req
    plain = FetchRequest(rpc.ReadRequest("t"))
    assert decode_fetch_request(encode_fetch_request(plain)) == plain
    for bad in ({"min_records": -1}, {"max_bytes": -1}, {"min_bytes": "x"}, {"min_bytes": 0}):
        with pytest.raises(TopicError, match="BadRequest"):
            FetchRequest(rpc.ReadRequest("t"), **bad)  # type: ignore[arg-type]


def test_thresholds_and_credit() -> None:
    req = FetchRequest(rpc.ReadRequest("t", wait_ms=100), min_records=3, min_bytes=50)
    assert not req.satisfied(result(10, 10))
    assert req.satisfied(result(10, 10, 10))
    assert req.satisfied(result(60))
    credit = FetchRequest(rpc.ReadRequest("t"), max_bytes=25)
    cut = credit.within_credit(result(10, 10, 10))
    assert [len(i.record.value) for i in cut.records] == [10, 10] and cut.more
    alone = credit.within_credit(result(40, 10))
    assert [len(i.record.value) for i in alone.records] == [40] and alone.more


class Handler:
    def __init__(self) -> None:
        self.available: rpc.ReadResult = result()

    def handle_request(self, msg_type: bytes, args: Sequence[bytes]) -> list[bytes]:
        req = decode_fetch_request(args)
        return rpc.encode_read_response(req.within_credit(self.available))


class Replies:
    def __init__(self) -> None:
        self.sent: list[object] = []

    def reply(self, routing: bytes, msg_id: bytes, message: object) -> None:
        self.sent.append(message)


def test_a_parked_fetch_waits_for_its_thresholds() -> None:
    handler, replies, now = Handler(), Replies(), [0.0]
    parked = ParkedReads(handler, replies, clock=lambda: now[0])  # type: ignore[arg-type]
    req = FetchRequest(rpc.ReadRequest("t", wait_ms=1000), min_records=2)
    message = ClientDispatch(TYPE_FETCH, tuple(encode_fetch_request(req)))
    held = parkable(message, handler.handle_request(TYPE_FETCH, message.args))
    assert held is not None
    assert parked.park(b"r", b"m", message, *held)
    handler.available = result(5)
    parked.on_applied(1)
    assert not replies.sent  # one record: short of min_records
    handler.available = result(5, 5)
    parked.on_applied(2)
    assert len(replies.sent) == 1 and len(parked) == 0


def test_a_wake_up_brings_no_records_and_goes_once_some_are_there() -> None:
    """``max_bytes`` 0 (how a REST long poll waits): the answer never carries records,
    ``more`` says they came; parked, it goes at the first apply that brings some."""
    wake = FetchRequest(rpc.ReadRequest("t", wait_ms=1000), max_bytes=0)
    assert decode_fetch_request(encode_fetch_request(wake)) == wake
    cut = wake.within_credit(result(4 * 1024 * 1024))
    assert cut.records == () and cut.more
    assert not wake.within_credit(result()).more
    handler, replies = Handler(), Replies()
    parked = ParkedReads(handler, replies, clock=lambda: 0.0)  # type: ignore[arg-type]
    message = ClientDispatch(TYPE_FETCH, tuple(encode_fetch_request(wake)))
    held = parkable(message, handler.handle_request(TYPE_FETCH, message.args))
    assert held is not None and parked.park(b"r", b"m", message, *held)
    parked.on_applied(1)
    assert not replies.sent  # still nothing
    handler.available = result(10)
    assert parkable(message, handler.handle_request(TYPE_FETCH, message.args)) is None
    parked.on_applied(2)
    assert len(replies.sent) == 1 and len(parked) == 0
    answer = rpc.decode_read_response(replies.sent[0].frames)  # type: ignore[attr-defined]
    assert answer.records == () and answer.more
