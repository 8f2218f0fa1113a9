"""The codec refuses peer RPCs and responses whose term or index is above the ceiling of
``raftlog.bounds`` with ``OutOfRangeError`` (a ``RemoteProtocolError``), so the peer drops them
at its edge as ``term_out_of_range`` / ``index_out_of_range`` (issue #12, finding 1)."""

from __future__ import annotations

import pytest

from raftlog.bounds import INDEX_OUT_OF_RANGE, MAX_INDEX, MAX_TERM, TERM_OUT_OF_RANGE
from raftlog.entry import EntryType, LogEntry
from raftlog.errors import RemoteProtocolError
from raftlog.rpc.codec import decode_request
from raftlog.rpc.frames import encode_bool, encode_uint
from raftlog.rpc.messages import (
    AppendEntries,
    InstallSnapshot,
    Request,
    RequestVote,
    RequestVoteResponse,
)
from raftlog.rpc.ranges import OutOfRangeError
from raftlog.rpc.request_encoders import encode_request
from raftlog.rpc.response_decoders import decode_response

ENTRY = LogEntry(bytes(12), EntryType.STATE, 1, b"x")


def frames(message: Request) -> list[bytes]:
    return encode_request(message, ident=b"id", id=b"\x01")


@pytest.mark.parametrize("term", [2**53 - 1, 2**53 - 2, MAX_TERM + 1])
def test_forged_request_vote_terms_are_refused(term: int) -> None:
    with pytest.raises(OutOfRangeError) as caught:
        decode_request(frames(RequestVote("n2", term, 0, 0)))
    assert caught.value.drop_reason == TERM_OUT_OF_RANGE
    assert isinstance(caught.value, RemoteProtocolError)  # every decoder error is one


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (RequestVote("n2", 1, 0, MAX_TERM + 1), TERM_OUT_OF_RANGE),
        (RequestVote("n2", 1, MAX_INDEX + 1, 0), INDEX_OUT_OF_RANGE),
        (AppendEntries("n2", MAX_TERM + 1, 0, 0, 0), TERM_OUT_OF_RANGE),
        (AppendEntries("n2", 1, MAX_INDEX + 1, 0, 0), INDEX_OUT_OF_RANGE),
        (AppendEntries("n2", 1, 0, 0, 2**53 - 1), INDEX_OUT_OF_RANGE),
        (AppendEntries("n2", 1, MAX_INDEX, 1, 0, (ENTRY,)), INDEX_OUT_OF_RANGE),
        (
            AppendEntries("n2", 1, 0, 0, 0, (LogEntry(bytes(12), 0, MAX_TERM + 1, b"x"),)),
            TERM_OUT_OF_RANGE,
        ),
        (InstallSnapshot("n2", 2**53 - 1, 1, 1, 0, 1, b"x"), TERM_OUT_OF_RANGE),
        (InstallSnapshot("n2", 1, MAX_INDEX + 1, 1, 0, 1, b"x"), INDEX_OUT_OF_RANGE),
        (InstallSnapshot("n2", 1, 1, MAX_TERM + 1, 0, 1, b"x"), TERM_OUT_OF_RANGE),
    ],
)
def test_every_term_and_index_of_a_peer_request_is_bounded(message: Request, reason: str) -> None:
    with pytest.raises(OutOfRangeError) as caught:
        decode_request(frames(message))
    assert caught.value.drop_reason == reason


def test_values_at_the_ceiling_decode() -> None:
    message = AppendEntries("n2", MAX_TERM, MAX_INDEX - 1, MAX_TERM, MAX_INDEX, (ENTRY,))
    assert decode_request(frames(message)).message == message


@pytest.mark.parametrize(
    ("request_type", "response"),
    [
        (b"?", [b"\x01", encode_uint(2**53 - 1), encode_bool(False)]),
        (b"+", [b"\x01", encode_uint(MAX_TERM + 1), encode_bool(False)]),
        (b"+", [b"\x01", encode_uint(1), encode_bool(False), encode_uint(2**53 - 1)]),
        (b"$", [b"\x01", encode_uint(2**53 - 2)]),
    ],
)
def test_responses_are_bounded_too(request_type: bytes, response: list[bytes]) -> None:
    with pytest.raises(OutOfRangeError):
        decode_response(request_type, response)


def test_a_response_at_the_ceiling_decodes() -> None:
    frames_in = [b"\x01", encode_uint(MAX_TERM), encode_bool(True)]
    assert decode_response(b"?", frames_in) == (b"\x01", RequestVoteResponse(MAX_TERM, True))
