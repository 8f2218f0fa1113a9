"""The topic entry format (topics/records.py): vectors, round trips, errors, the leader stamp."""

from __future__ import annotations

import contextlib

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from raftlog.topics.record_decode import decode_entry
from raftlog.topics.records import (
    FLAG_AUTO_CREATE,
    HEADER_SIZE,
    MAGIC,
    Record,
    RecordBatch,
    RecordFormatError,
    RecordId,
    TopicCommand,
    TopicError,
    TopicProperties,
    check_topic_name,
    encode_command,
    encode_records,
)
from raftlog.topics.stamp import AppendClock, append_time_of, stamp_append_time

ONE_RECORD = bytes.fromhex(
    "c1524c54"
    "01"
    "01"
    "00"
    "0000000000000000"  # magic, version, kind, flags, append time
    "91"
    "95"
    "a66f7264657273"
    "c4026b31"
    "c4027631"
    "81a168c40178"
    "cf0000018bcfe56800"
)
STAMPED = bytes.fromhex(
    "c1524c540101010000018bcfe5687b9195a66f7264657273c4026b31c402763181a168c40178cf0000018bcfe56800"
)
CREATE = bytes.fromhex(
    "c1524c54010200000000000000000093a6637265617465a66f726465727381ac726574656e74696f6e5f6d73cdea60"
)
DELETE = bytes.fromhex("c1524c54010200000000000000000093a664656c657465a66f726465727380")
RECORD = Record("orders", b"v1", b"k1", {"h": b"x"}, 1_700_000_000_000)


# --- vectors -------------------------------------------------------------------------------


def test_record_batch_vector() -> None:
    assert encode_records([RECORD]) == ONE_RECORD
    assert decode_entry(ONE_RECORD) == RecordBatch((RECORD,), 0, 0)


def test_stamp_vector_sets_time_and_leader_flags_without_reencoding() -> None:
    stamped = stamp_append_time(ONE_RECORD, 1_700_000_000_123, auto_create=True)
    assert stamped == STAMPED
    assert stamped[HEADER_SIZE:] == ONE_RECORD[HEADER_SIZE:]
    entry = decode_entry(stamped)
    assert isinstance(entry, RecordBatch)
    assert entry.append_time_ms == 1_700_000_000_123 and entry.auto_create
    assert append_time_of(stamped) == 1_700_000_000_123
    # the leader's configuration decides: a client-set flag is cleared when not allowed
    assert decode_entry(stamp_append_time(stamped, 5)) == RecordBatch((RECORD,), 5, 0)


def test_admin_vectors() -> None:
    assert encode_command(TopicCommand("create", "orders", {"retention_ms": 60_000})) == CREATE
    assert decode_entry(CREATE) == TopicCommand("create", "orders", {"retention_ms": 60_000})
    assert encode_command(TopicCommand("delete", "orders")) == DELETE
    assert decode_entry(DELETE) == TopicCommand("delete", "orders", {})
    # admin commands never carry AUTO_CREATE, even when the leader has it on
    assert stamp_append_time(CREATE, 7, auto_create=True)[6] == 0


# --- not a topic entry vs. a bad one --------------------------------------------------------


@pytest.mark.parametrize(
    "data", [b"x", b"hello", msgpack.packb({"a": 1}), b"\xc1RL", b"\xc1RLt" + bytes(20)]
)
def test_data_without_the_magic_is_not_a_topic_entry(data: bytes) -> None:
    assert decode_entry(data) is None
    assert append_time_of(data) == 0


def _with_body(body: object, kind: int = 1, flags: int = 0, version: int = 1) -> bytes:
    return MAGIC + bytes((version, kind, flags)) + bytes(8) + msgpack.packb(body)


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (MAGIC, "too short"),
        (ONE_RECORD[:HEADER_SIZE], "too short"),
        (_with_body([], version=2), "version 2"),
        (_with_body([], kind=9), "kind 9"),
        (_with_body([], flags=0x80), "unknown flags"),
        (_with_body(["create", "t", {}], kind=2, flags=1), "no flags"),
        (MAGIC + bytes((1, 1, 0)) + b"\xff" * 8 + b"\x90", "out of range"),
        (ONE_RECORD[:-3], "invalid MessagePack"),
        (ONE_RECORD + b"\x00", "invalid MessagePack"),  # trailing bytes
        (_with_body([]), "non-empty array"),
        (_with_body({"a": 1}), "non-empty array"),
        (_with_body([["t", None, b"v", {}]]), "5- or 6-element"),
        (_with_body([["t", None, "text", {}, 0]]), "value must be bytes"),
        (_with_body([["t", "k", b"v", {}, 0]]), "key must be bytes"),
        (_with_body([["t", None, b"v", [], 0]]), "headers must be a map"),
        (_with_body([["t", None, b"v", {"h": "s"}, 0]]), "header"),
        (_with_body([["t", None, b"v", {}, -1]]), "timestamp"),
        (_with_body([["t", None, b"v", {}, 1.5]]), "timestamp"),
        (_with_body([["bad name", None, b"v", {}, 0]]), "invalid topic name"),
        (_with_body(["rename", "t", {}], kind=2), "unknown admin operation"),
        (_with_body(["create", "t"], kind=2), "3-element"),
        (_with_body(["create", "t", {"ttl": 5}], kind=2), "unknown topic property"),
        (_with_body(["create", "t", {"retention_ms": 0}], kind=2), "retention_ms"),
        (_with_body(["create", "t", {"max_bytes": True}], kind=2), "max_bytes"),
        (_with_body(["delete", "t", {"max_bytes": 5}], kind=2), "no properties"),
    ],
)
def test_bad_topic_entries_raise_a_clear_error(data: bytes, fragment: str) -> None:
    with pytest.raises(RecordFormatError, match=fragment) as info:
        decode_entry(data)
    assert isinstance(info.value, TopicError) and isinstance(info.value, ValueError)


def test_error_codes_name_the_problem() -> None:
    with pytest.raises(RecordFormatError) as bad_name:
        decode_entry(_with_body([["", None, b"v", {}, 0]]))
    assert bad_name.value.name == "InvalidTopicName"
    with pytest.raises(RecordFormatError) as bad_prop:
        decode_entry(_with_body(["create", "t", {"x": 1}], kind=2))
    assert bad_prop.value.name == "InvalidProperty"
    with pytest.raises(RecordFormatError) as bad_body:
        decode_entry(_with_body([]))
    assert bad_body.value.name == "BadRecord"


@pytest.mark.parametrize(
    "name", ["", ".", "..", "a b", "a/b", "é", "a\x00b", "x" * 250, 5, None, b"t"]
)
def test_invalid_topic_names(name: object) -> None:
    with pytest.raises(RecordFormatError, match="invalid topic name"):
        check_topic_name(name)


@pytest.mark.parametrize("name", ["a", "A.b_c-9", "x" * 249, "...", "_"])
def test_valid_topic_names(name: str) -> None:
    assert check_topic_name(name) == name


def test_encoders_refuse_what_the_decoder_would_refuse() -> None:
    with pytest.raises(RecordFormatError, match="at least one record"):
        encode_records([])
    with pytest.raises(RecordFormatError, match="invalid topic name"):
        encode_records([Record("no spaces", b"v")])
    with pytest.raises(RecordFormatError, match="value must be bytes"):
        encode_records([Record("t", "text")])  # type: ignore[arg-type]
    with pytest.raises(RecordFormatError, match="unknown admin operation"):
        encode_command(TopicCommand("drop", "t"))  # type: ignore[arg-type]
    with pytest.raises(RecordFormatError, match="unknown flags"):
        encode_records([RECORD], flags=0x10)
    with pytest.raises(RecordFormatError, match="not a topic entry"):
        stamp_append_time(b"plain data", 1)


# --- ids, sizes, the clock -----------------------------------------------------------------


def test_record_ids_sort_in_log_order() -> None:
    ids = [RecordId(10, 2), RecordId(2, 7), RecordId(10, 0), RecordId(3, 0)]
    assert sorted(ids) == [RecordId(2, 7), RecordId(3, 0), RecordId(10, 0), RecordId(10, 2)]
    assert str(RecordId(10, 2)) == "10:2"


def test_record_size_counts_key_value_and_headers() -> None:
    assert Record("t", b"abc", b"k", {"hé": b"12"}, 0).size == 3 + 1 + 3 + 2


def test_properties_update_only_what_is_given() -> None:
    props = TopicProperties(retention_ms=5, max_bytes=9)
    assert props.updated({"max_bytes": None}) == TopicProperties(5, None)
    assert props.updated({"max_record_bytes": 3}) == TopicProperties(5, 9, 3)
    assert props.updated({}) == props


def test_append_clock_never_goes_back() -> None:
    clock = AppendClock()
    times = [append_time_of(clock.stamp(ONE_RECORD, now)) for now in (100, 90, 150, 149, 150)]
    assert times == [100, 100, 150, 150, 150]
    flagged = clock.stamp(ONE_RECORD, 200, auto_create=True)
    assert flagged[6] == FLAG_AUTO_CREATE


# --- round trips ---------------------------------------------------------------------------

names = st.from_regex(r"[A-Za-z0-9._-]{1,20}", fullmatch=True).filter(
    lambda n: n not in (".", "..")
)
records = st.builds(
    Record,
    topic=names,
    value=st.binary(max_size=64),
    key=st.none() | st.binary(max_size=16),
    headers=st.dictionaries(st.text(max_size=8), st.binary(max_size=8), max_size=4),
    timestamp_ms=st.integers(0, (1 << 53) - 1),
)
props = st.fixed_dictionaries(
    {},
    optional={
        "retention_ms": st.none() | st.integers(1, (1 << 53) - 1),
        "max_bytes": st.none() | st.integers(1, (1 << 53) - 1),
    },
)


@given(st.lists(records, min_size=1, max_size=8), st.integers(0, (1 << 53) - 1), st.booleans())
def test_record_batches_round_trip(batch: list[Record], now: int, auto: bool) -> None:
    data = encode_records(batch)
    assert decode_entry(data) == RecordBatch(tuple(batch), 0, 0)
    stamped = stamp_append_time(data, now, auto_create=auto)
    assert decode_entry(stamped) == RecordBatch(tuple(batch), now, FLAG_AUTO_CREATE if auto else 0)


@given(st.sampled_from(["create", "update"]), names, props)
def test_admin_commands_round_trip(op: str, topic: str, properties: dict[str, int | None]) -> None:
    command = TopicCommand(op, topic, properties)  # type: ignore[arg-type]
    assert decode_entry(encode_command(command)) == command


@given(st.binary(max_size=64))
def test_arbitrary_bytes_after_the_magic_never_raise_anything_but_the_format_error(
    tail: bytes,
) -> None:
    with contextlib.suppress(RecordFormatError):
        decode_entry(MAGIC + tail)
