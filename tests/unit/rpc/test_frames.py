"""Frame primitives (docs/protocol.md §2, §3, §6): the spec's vectors and the error contract."""

from __future__ import annotations

import math

import pytest

from raftlog.errors import LocalProtocolError, RemoteProtocolError
from raftlog.rpc.frames import (
    MAX_JSON_DEPTH,
    MAX_SAFE_INTEGER,
    decode_bool,
    decode_entry,
    decode_json,
    decode_msg_id,
    decode_nuint,
    decode_request_id,
    decode_string,
    decode_uint,
    encode_bool,
    encode_msg_id,
    encode_nuint,
    encode_string,
    encode_uint,
    json_to_optional_str,
    json_to_uint,
    next_msg_id,
    pack_json,
)

UINT_VECTORS = [
    (0, "00"),
    (1, "01"),
    (255, "ff"),
    (256, "0001"),
    (65535, "ffff"),
    (65536, "000001"),
    (2**24 - 1, "ffffff"),
    (2**32 - 1, "ffffffff"),
    (2**32, "0000000001"),
    (2**48, "00000000000001"),
    (2**53 - 1, "ffffffffffff1f"),
]


@pytest.mark.parametrize(("value", "hex_frame"), UINT_VECTORS)
def test_uint_vectors(value: int, hex_frame: str) -> None:
    assert encode_uint(value).hex() == hex_frame
    assert decode_uint(bytes.fromhex(hex_frame), 4) == value
    assert encode_nuint(value).hex() == hex_frame
    assert decode_nuint(bytes.fromhex(hex_frame), 4) == value


def test_uint_decoder_accepts_non_minimal_forms_of_any_length() -> None:
    assert decode_uint(bytes.fromhex("010000"), 0) == 1
    assert decode_uint(bytes.fromhex("010000000000000000"), 0) == 1  # 9 bytes
    assert decode_uint(b"\x05" + bytes(10_000), 0) == 5
    assert decode_uint(bytes.fromhex("ffffffffffff1f00"), 0) == MAX_SAFE_INTEGER


@pytest.mark.parametrize(
    "hex_frame", ["", "00000000000020", "ffffffffffffff", "0000000000000001", "00" * 100 + "01"]
)
def test_uint_decoder_rejects_empty_and_too_big(hex_frame: str) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        decode_uint(bytes.fromhex(hex_frame), 6)
    assert info.value.frame == 6


def test_nuint_null_is_the_empty_frame() -> None:
    assert encode_nuint(None) == b""
    assert decode_nuint(b"", 3) is None


@pytest.mark.parametrize("value", [-1, 2**53, 2**64])
def test_uint_encoder_rejects_what_the_reference_cannot_hold(value: int) -> None:
    with pytest.raises(LocalProtocolError):
        encode_uint(value)


def test_msg_ids() -> None:
    assert encode_msg_id(0) == b"\x00"
    assert encode_msg_id(2**24 - 1) == b"\xff\xff\xff"
    assert decode_msg_id(b"\x01\x00\x00") == 1
    assert next_msg_id(2**24 - 1) == 0
    assert next_msg_id(1) == 2
    for bad in (-1, 2**24):
        with pytest.raises(LocalProtocolError):
            encode_msg_id(bad)
    for frame in (b"", b"\x01\x00\x00\x00"):
        with pytest.raises(RemoteProtocolError) as info:
            decode_msg_id(frame)
        assert info.value.frame == 0


def test_bool() -> None:
    assert encode_bool(True) == b"\x01"
    assert encode_bool(False) == b""
    assert decode_bool(b"\x01") is True
    assert decode_bool(b"\x02") is True
    assert decode_bool(b"") is False
    assert decode_bool(b"\x00\x01") is False  # only the first byte counts


def test_string() -> None:
    assert encode_string("foo").hex() == "666f6f"
    assert decode_string(bytes.fromhex("666f6f"), 3) == "foo"
    assert decode_string("żółw".encode(), 3) == "żółw"
    with pytest.raises(RemoteProtocolError) as info:
        decode_string(b"\xff\xfe", 3)
    assert info.value.frame == 3
    with pytest.raises(LocalProtocolError):
        encode_string("\udc80")  # lone surrogate


JSON_VECTORS: list[tuple[object, str]] = [
    (None, "c0"),
    ([42, "foo", False], "932aa3666f6fc2"),
    (42, "2a"),
    (128, "cc80"),
    (301, "cd012d"),
    (65536, "ce00010000"),
    (2147483647, "ce7fffffff"),
    (2147483648, "cb41e0000000000000"),
    (4294967296, "cb41f0000000000000"),
    ("1", "a131"),
    ("a" * 32, "d920" + "61" * 32),
    ([["1", "tcp://127.0.0.1:8047"]], "9192a131b47463703a2f2f3132372e302e302e313a38303437"),
    (
        {"name": "TypeError", "message": "peers must be an array"},
        "82a46e616d65a9547970654572726f72a76d657373616765b6"
        "7065657273206d75737420626520616e206172726179",
    ),
    (True, "c3"),
]


@pytest.mark.parametrize(("value", "hex_frame"), JSON_VECTORS)
def test_json_vectors(value: object, hex_frame: str) -> None:
    assert pack_json(value).hex() == hex_frame
    decoded = decode_json(bytes.fromhex(hex_frame), 2)
    if type(value) is int and value >= 2**31:
        assert decoded == float(value)
        assert json_to_uint(decoded, 2, "index") == value
    else:
        assert decoded == value


def test_json_encoder_writes_wide_negatives_as_doubles_and_refuses_unsafe_ints() -> None:
    assert pack_json(-(2**31)).hex() == "d280000000"
    assert pack_json(-(2**31) - 1)[0] == 0xCB
    with pytest.raises(LocalProtocolError):
        pack_json(2**53)
    with pytest.raises(LocalProtocolError):
        pack_json(object())
    assert pack_json(b"\x01")[0] == 0xC4  # bytes as bin, strings as str


@pytest.mark.parametrize(
    "hex_frame",
    [
        "",  # present but empty
        "92c0",  # truncated array
        "c0c0",  # two values
        "c1",  # never-used type byte
        "a2ff",  # invalid UTF-8 in a str
        "81" + "91c0" + "c0",  # map with an array key (unhashable)
        "dd7fffffff",  # array header claiming 2^31 items
        "db7fffffff",  # str header claiming 2^31 bytes
    ],
)
def test_json_decoder_rejects_malformed_values(hex_frame: str) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        decode_json(bytes.fromhex(hex_frame), 7)
    assert info.value.frame == 7


def test_json_nesting_is_bounded() -> None:
    ok = b"\x91" * MAX_JSON_DEPTH + b"\xc0"  # MAX_JSON_DEPTH arrays deep
    decode_json(ok, 2)
    for depth in (MAX_JSON_DEPTH + 1, 1000, 100_000):
        with pytest.raises(RemoteProtocolError):
            decode_json(b"\x91" * depth + b"\xc0", 2)
    map_bomb = b"\x81\xa1k" * 200 + b"\xc0"
    with pytest.raises(RemoteProtocolError):
        decode_json(map_bomb, 2)


def test_json_frame_size_is_bounded() -> None:
    with pytest.raises(RemoteProtocolError):
        decode_json(b"\xdb" + (2**21).to_bytes(4, "big") + bytes(2**21), 2)


@pytest.mark.parametrize("value", [301, 301.0, 2.0**31, 2.0**53 - 1])
def test_json_to_uint_accepts_integral_numbers(value: object) -> None:
    assert json_to_uint(value, 2, "index") == int(value)  # type: ignore[call-overload]


@pytest.mark.parametrize(
    "value", [-1, 1.5, -2.0, math.nan, math.inf, 2.0**53, 2**53, True, None, "1", [1]]
)
def test_json_to_uint_rejects_non_indices(value: object) -> None:
    with pytest.raises(RemoteProtocolError):
        json_to_uint(value, 2, "index")


def test_json_to_optional_str() -> None:
    assert json_to_optional_str("A", 2, "leader") == "A"
    assert json_to_optional_str(None, 2, "leader") is None
    for bad in (b"A", 1, ["A"]):
        with pytest.raises(RemoteProtocolError):
            json_to_optional_str(bad, 2, "leader")


def test_request_id_frame_is_exactly_12_bytes() -> None:
    assert decode_request_id(bytes(range(12)), 0) == bytes(range(12))
    for size in (0, 11, 13):
        with pytest.raises(RemoteProtocolError):
            decode_request_id(bytes(size), 0)


def test_entry_frames_wrap_format_errors_with_the_frame_number() -> None:
    entry = decode_entry(bytes.fromhex("5956dc8826f27e10dcccab20002a000000000000666f6f"), 9)
    assert (entry.term, entry.data) == (42, b"foo")
    with pytest.raises(RemoteProtocolError) as info:
        decode_entry(bytes(20), 9)  # header only: no data byte
    assert info.value.frame == 9
