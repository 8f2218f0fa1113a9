"""Topic RPC frames (raftlog.topics.wire): vectors, round trips, malformed input."""

from __future__ import annotations

import contextlib

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from raftlog.errors import RemoteProtocolError
from raftlog.topics import wire as rpc
from raftlog.topics import wire_publish as publish
from raftlog.topics.records import LoggedRecord, Record, RecordId, TopicError, TopicProperties
from raftlog.topics.wire_errors import encode_error

REC = LoggedRecord(RecordId(7, 1), 1_700_000_000_123, Record("t", b"v", b"k", {"h": b"x"}, 5))


def test_read_request_vector_and_round_trip() -> None:
    req = rpc.ReadRequest("orders", from_index=7, from_position=1, inclusive=False, limit=10)
    frames = rpc.encode_read_request(req)
    assert msgpack.unpackb(frames[0]) == {
        "topic": "orders",
        "inclusive": False,
        "limit": 10,
        "from_index": 7,
        "from_position": 1,
    }
    assert rpc.decode_read_request(frames) == req
    by_time = rpc.ReadRequest("orders", from_time_ms=123)
    assert rpc.decode_read_request(rpc.encode_read_request(by_time)) == by_time
    assert rpc.decode_read_request([msgpack.packb({"topic": "x"})]) == rpc.ReadRequest("x")
    # pack_json writes numbers >= 2^31 as float64, like the reference: read back as integers
    big = rpc.ReadRequest("t", from_time_ms=1_700_000_000_000)
    frame = rpc.encode_read_request(big)[0]
    assert isinstance(msgpack.unpackb(frame)["from_time"], float)
    assert rpc.decode_read_request([frame]) == big


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"topic": "t", "from_index": 1, "from_time": 2}, "not both"),
        ({"topic": "t", "from_position": 1}, "needs from_index"),
        ({"topic": "t", "from_index": -1}, "from_index"),
        ({"topic": "t", "from_index": "1"}, "from_index"),
        ({"topic": "t", "from_time": 1.5}, "from_time"),
        ({"topic": "t", "limit": 0}, "limit"),
        ({"topic": "t", "limit": 10**6}, "limit"),
        ({"topic": "t", "inclusive": 1}, "inclusive"),
        ({"topic": "t", "form_index": 1}, "unknown read request keys"),
        ({"limit": 1}, "at least a topic"),
        ([1, 2], "at least a topic"),
    ],
)
def test_bad_read_requests_are_answered_with_bad_request(body: object, fragment: str) -> None:
    with pytest.raises(TopicError, match=fragment) as info:
        rpc.decode_read_request([msgpack.packb(body)])
    assert info.value.name == "BadRequest"


def test_bad_read_request_frames() -> None:
    with pytest.raises(TopicError, match="one argument frame"):
        rpc.decode_read_request([])
    with pytest.raises(TopicError, match="MessagePack"):
        rpc.decode_read_request([b"\x93\x01"])
    with pytest.raises(TopicError) as info:
        rpc.decode_read_request([msgpack.packb({"topic": "bad name"})])
    assert info.value.name == "InvalidTopicName"


def test_read_response_vector_and_round_trip() -> None:
    result = rpc.ReadResult((REC,), applied=9, is_leader=True, more=True)
    frames = rpc.encode_read_response(result)
    assert frames[0] == b"\x01"
    assert msgpack.unpackb(frames[1]) == {"applied": 9, "leader": True, "more": True}
    assert frames[2] == msgpack.packb(
        [7, 1, 1_700_000_000_123, "t", b"k", b"v", {"h": b"x"}, 5], use_bin_type=True
    )
    assert rpc.decode_read_response(frames) == result
    empty = rpc.ReadResult((), 0, False, False)
    assert rpc.decode_read_response(rpc.encode_read_response(empty)) == empty


def test_error_answers_raise_their_topic_error() -> None:
    frames = encode_error(TopicError("UnknownTopic", "topic 'x' does not exist"))
    assert frames[0] == b""
    for decode in (rpc.decode_read_response, rpc.decode_describe_response):
        with pytest.raises(TopicError, match="UnknownTopic: topic 'x'") as info:
            decode(frames)
        assert info.value.name == "UnknownTopic"


@pytest.mark.parametrize(
    "frames",
    [
        [],
        [b"\x01"],
        [b"", b"\xc0"],
        [b"", msgpack.packb({"name": 1, "message": "m"})],
        [b"", msgpack.packb({"name": "n", "message": "m"}), b"extra"],
        [b"\x01", msgpack.packb([1])],
        [b"\x01", msgpack.packb({"applied": -1})],
        [b"\x01", msgpack.packb({"applied": 1}), msgpack.packb([1, 2, 3])],
        [b"\x01", msgpack.packb({"applied": 1}), b"\x93"],
        [
            b"\x01",
            msgpack.packb({"applied": 1}),
            msgpack.packb([1, 0, 0, "bad t", None, b"", {}, 0]),
        ],
        [b"\x01", msgpack.packb({"applied": 1}), msgpack.packb([1, 0, 0, "t", None, "s", {}, 0])],
    ],
)
def test_malformed_read_responses_are_protocol_errors(frames: list[bytes]) -> None:
    with pytest.raises(RemoteProtocolError):
        rpc.decode_read_response(frames)


def test_publish_replies_cover_every_answer() -> None:
    error = TopicError("UnknownTopic", "nope")
    assert publish.decode_publish_reply([b"\x01"]) == publish.PublishReply("accepted")
    assert publish.decode_publish_reply([b"\x01", b"\x2a"]) == publish.PublishReply("done", 42)
    assert publish.decode_publish_reply([b"", msgpack.packb("2")]) == publish.PublishReply(
        "not_leader", leader_id="2"
    )
    assert publish.decode_publish_reply([b"", b"\xc0"]) == publish.PublishReply("not_leader")
    assert publish.decode_publish_reply([b""]) == publish.PublishReply("expired")
    frames = publish.encode_publish_rejection(error)
    assert frames[:2] == [b"", b"\xc0"]
    reply = publish.decode_publish_reply(frames)
    assert reply.status == "rejected" and reply.final
    assert reply.error is not None and (reply.error.name, reply.error.message) == (
        "UnknownTopic",
        "nope",
    )
    assert not publish.decode_publish_reply([b"\x01"]).final
    for bad in ([], [b"\x01", b"\x01", b"\x01"], [b"", b"\x01"], [b"\x01", b"\xa1x"]):
        with pytest.raises(RemoteProtocolError):
            publish.decode_publish_reply(bad)


def test_describe_and_list_round_trip() -> None:
    info = rpc.TopicInfo("t", TopicProperties(1000, None), 3, RecordId(4, 0), RecordId(9, 2), 77)
    frames = rpc.encode_describe_response(info)
    assert msgpack.unpackb(frames[1]) == {
        "name": "t",
        "retention_ms": 1000,
        "max_bytes": None,
        "created_index": 3,
        "first": [4, 0],
        "last": [9, 2],
        "last_append_time": 77,
        "max_record_bytes": None,
        "description": None,
        "cleanup_policy": None,
        "tombstone_retention_ms": None,
        "low_water": None,
        "published_bytes": 0,
        "log_clock": 0,
        "applied": 0,
    }
    assert rpc.decode_describe_response(frames) == info
    bare = rpc.TopicInfo("u", TopicProperties(), 1)
    assert rpc.decode_describe_response(rpc.encode_describe_response(bare)) == bare
    assert rpc.decode_describe_request([b"t"]) == "t"
    with pytest.raises(TopicError, match="invalid topic name"):
        rpc.decode_describe_request([b"a b"])
    with pytest.raises(TopicError, match="UTF-8"):
        rpc.decode_describe_request([b"\xff"])
    with pytest.raises(TopicError, match="one argument"):
        rpc.decode_describe_request([])
    assert rpc.decode_list_response(rpc.encode_list_response(["b", "a"])) == ("a", "b")
    with pytest.raises(RemoteProtocolError):
        rpc.decode_list_response([b"\x01", msgpack.packb([1])])


def test_topic_types_are_two_bytes_and_not_core_types() -> None:
    assert all(len(t) == 2 for t in rpc.TOPIC_TYPES)


logged = st.builds(
    LoggedRecord,
    id=st.builds(RecordId, st.integers(0, (1 << 53) - 1), st.integers(0, (1 << 32) - 1)),
    append_time_ms=st.integers(0, (1 << 53) - 1),
    record=st.builds(
        Record,
        topic=st.from_regex(r"[a-z0-9_]{1,10}", fullmatch=True),
        value=st.binary(max_size=32),
        key=st.none() | st.binary(max_size=8),
        headers=st.dictionaries(st.text(max_size=5), st.binary(max_size=5), max_size=3),
        timestamp_ms=st.integers(0, (1 << 53) - 1),
    ),
)


@given(st.lists(logged, max_size=5), st.integers(0, (1 << 53) - 1), st.booleans(), st.booleans())
def test_read_results_round_trip(
    items: list[LoggedRecord], applied: int, leader: bool, more: bool
) -> None:
    result = rpc.ReadResult(tuple(items), applied, leader, more)
    assert rpc.decode_read_response(rpc.encode_read_response(result)) == result


@given(st.lists(st.binary(max_size=24), max_size=4))
def test_random_read_response_frames_raise_only_protocol_or_topic_errors(
    frames: list[bytes],
) -> None:
    with contextlib.suppress(RemoteProtocolError, TopicError):
        rpc.decode_read_response(frames)
