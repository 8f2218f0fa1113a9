"""Hostile input: whatever the frames, decoders raise RemoteProtocolError or succeed -- never
IndexError, struct/msgpack/Unicode errors, RecursionError, OverflowError, nor hang.

About 11,000 examples in the default run (see the max_examples of each test)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rpc_strategies import broadcasts, idents, requests, responses

from raftlog.errors import ConfigError, RemoteProtocolError
from raftlog.rpc.codec import (
    CORE_TYPES,
    decode_broadcast,
    decode_request,
    encode_broadcast,
)
from raftlog.rpc.config import decode_config_payload
from raftlog.rpc.frames import decode_json
from raftlog.rpc.messages import Request, Response, StateBroadcast
from raftlog.rpc.request_encoders import encode_request
from raftlog.rpc.response_decoders import decode_response
from raftlog.rpc.responses import encode_response

ALL_TYPES = [*sorted(CORE_TYPES), b"W", b"", b"xy"]


def fuzz(examples: int) -> Callable[[Callable[..., None]], Callable[..., None]]:
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def _decodes_or_rejects(decode: Callable[[], object]) -> None:
    """The only accepted failure is RemoteProtocolError; anything else fails the test."""
    try:
        decode()
    except RemoteProtocolError as exc:
        assert exc.frame is None or exc.frame >= 0


# Frames that are "almost right": short numbers, entry-sized blobs, msgpack-looking bytes.
interesting_frames = st.one_of(
    st.binary(max_size=4),
    st.binary(min_size=19, max_size=24),
    st.binary(min_size=12, max_size=12),
    st.sampled_from(
        [b"", b"\x00", b"\x01", b"\xc0", b"\x91\xc0", b"\x93\x00\x01\x02", b"\xcb" + b"\xff" * 8]
    ),
    st.binary(max_size=64).map(lambda b: b"\xff" * 7 + b),  # uint > 2^53-1
    st.binary(max_size=40),
)
frame_lists = st.lists(interesting_frames, max_size=14)


@fuzz(2500)
@given(st.lists(st.binary(max_size=32), max_size=12), st.sampled_from(ALL_TYPES), frame_lists)
def test_random_requests(raw: list[bytes], msg_type: bytes, args: list[bytes]) -> None:
    _decodes_or_rejects(lambda: decode_request(raw))
    # Same, with a real type byte so that every argument decoder is exercised.
    for msg_id in (b"\x01", bytes(12), b""):
        frames = [msg_id, msg_type, b"id", *args]
        _decodes_or_rejects(functools.partial(decode_request, frames))


@fuzz(2500)
@given(st.sampled_from(ALL_TYPES), frame_lists, st.sampled_from([b"\x01", bytes(12), b""]))
def test_random_responses(request_type: bytes, frames: list[bytes], msg_id: bytes) -> None:
    _decodes_or_rejects(lambda: decode_response(request_type, [msg_id, *frames]))
    _decodes_or_rejects(lambda: decode_response(request_type, frames))


@fuzz(1000)
@given(frame_lists)
def test_random_broadcasts(frames: list[bytes]) -> None:
    _decodes_or_rejects(lambda: decode_broadcast(frames))


def _mutate(frames: Sequence[bytes], data: st.DataObject) -> list[bytes]:
    out = list(frames)
    for _ in range(data.draw(st.integers(1, 3))):
        action = data.draw(
            st.sampled_from(["drop", "truncate", "flip", "insert", "replace", "empty"])
        )
        if not out and action != "insert":
            continue
        at = data.draw(st.integers(0, max(len(out) - 1, 0)))
        if action == "drop":
            del out[at]
        elif action == "truncate":
            out[at] = out[at][: data.draw(st.integers(0, max(len(out[at]) - 1, 0)))]
        elif action == "flip" and out[at]:
            pos = data.draw(st.integers(0, len(out[at]) - 1))
            byte = data.draw(st.integers(0, 255))
            out[at] = out[at][:pos] + bytes((byte,)) + out[at][pos + 1 :]
        elif action == "insert":
            out.insert(at, data.draw(interesting_frames))
        elif action == "replace":
            out[at] = data.draw(interesting_frames)
        elif action == "empty":
            out[at] = b""
    return out


@fuzz(2000)
@given(requests, idents, st.data())
def test_mutated_requests(message: Request, ident: bytes, data: st.DataObject) -> None:
    frames = encode_request(
        message, ident=ident, id=None if hasattr(message, "request_id") else b"\x07"
    )
    mutated = _mutate(frames, data)
    _decodes_or_rejects(lambda: decode_request(mutated))


@fuzz(2000)
@given(responses, st.data())
def test_mutated_responses(pair: tuple[bytes, Response], data: st.DataObject) -> None:
    request_type, message = pair
    frames = encode_response(message, id=b"\x07" if not hasattr(message, "request_id") else None)
    mutated = _mutate(frames, data)
    _decodes_or_rejects(lambda: decode_response(request_type, mutated))


@fuzz(500)
@given(broadcasts, st.data())
def test_mutated_broadcasts(message: StateBroadcast, data: st.DataObject) -> None:
    mutated = _mutate(encode_broadcast(message, ident=b"s3cr3t"), data)
    _decodes_or_rejects(lambda: decode_broadcast(mutated))


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=12,
)


@fuzz(500)
@given(json_values, st.sampled_from([b"=", b"&", b"<", b"^", b"%"]), st.integers(0, 3))
def test_well_formed_msgpack_of_the_wrong_shape(
    value: object, request_type: bytes, where: int
) -> None:
    packed = msgpack.packb(value, use_bin_type=True)
    frames = [bytes(12), b"\x01", b"\x01", b"\x01", b"\x01"]
    frames[1 + where] = packed
    _decodes_or_rejects(lambda: decode_response(request_type, frames))
    _decodes_or_rejects(lambda: decode_request([bytes(12), b"&", b"", packed]))
    with contextlib.suppress(ConfigError):
        decode_config_payload(packed)


@fuzz(500)
@given(st.binary(max_size=64))
def test_random_json_and_config_bytes(raw: bytes) -> None:
    _decodes_or_rejects(lambda: decode_json(raw, 3))
    with contextlib.suppress(ConfigError):
        decode_config_payload(raw)


def test_nesting_bombs_are_protocol_errors() -> None:
    bomb = b"\x91" * 100_000 + b"\xc0"
    frames = [bytes(12), b"\x01", bomb, bomb, bomb]
    for request_type in (b"=", b"&", b"<", b"^", b"%"):
        _decodes_or_rejects(functools.partial(decode_response, request_type, frames))
    _decodes_or_rejects(lambda: decode_request([bytes(12), b"&", b"", bomb]))
