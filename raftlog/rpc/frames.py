"""Primitive frame codecs of the ØMQ RAFT wire format (docs/protocol.md §2, §3, §6).

Every ``decode_*`` function takes the frame and its 0-based position in the message (as the
decoder saw it) and raises :class:`~raftlog.errors.RemoteProtocolError` -- and nothing else --
when the bytes are not a valid value. Every ``encode_*`` function raises
:class:`~raftlog.errors.LocalProtocolError` when asked to encode something the protocol (or the
reference, which cannot hold integers above 2^53-1) cannot express: that is a bug on our side.

MessagePack ("json") frames are decoded defensively: the frame size, string/bin/array/map
lengths and the nesting depth are bounded, so a hostile frame can neither exhaust memory nor
blow the Python stack, and every msgpack failure mode is folded into ``RemoteProtocolError``.
"""

from __future__ import annotations

import math
from typing import Final

import msgpack

from raftlog.entry import REQUEST_ID_SIZE, LogEntry
from raftlog.errors import EntryFormatError, LocalProtocolError, RemoteProtocolError

MAX_SAFE_INTEGER: Final = (1 << 53) - 1
"""Largest integer the reference (JavaScript numbers) can represent exactly."""

MSG_ID_MODULUS: Final = 1 << 24
"""Peer msgids are a per-target counter modulo 2^24, hence 1-3 bytes on the wire (§6)."""

MAX_JSON_FRAME_SIZE: Final = 1 << 20
"""Upper bound of a json frame we are willing to decode. The reference only sends small values
(ids, indices, peer lists, error maps); 1 MiB leaves room for clusters of thousands of peers."""

MAX_JSON_DEPTH: Final = 16
"""Deepest nesting we accept in a json frame; real values nest at most 3 levels (joint config
map -> peer list -> [id, url])."""

_MAX_JSON_CONTAINER_LEN: Final = 1 << 16
_MSGPACK_INT32_MIN: Final = -(1 << 31)
_MSGPACK_INT32_MAX: Final = (1 << 31) - 1

_SMALL_UINTS: Final = tuple(bytes((n,)) for n in range(256))
TRUE_FRAME: Final = b"\x01"
FALSE_FRAME: Final = b""
EMPTY_FRAME: Final = b""
JSON_NULL: Final = b"\xc0"
_PACK_INT: Final = msgpack.Packer(use_bin_type=True).pack
"""Packs a non-negative int32 (an index, a term) the same as ``pack_json``'s general path,
~5x faster than ``msgpack.packb`` (which builds a Packer per call); it never releases the
GIL mid-pack, so threads may share it."""


# --- uint / nuint (§2.1) -------------------------------------------------------------------


def encode_uint(n: int) -> bytes:
    """Minimal little-endian form; 0 is ``00`` (never an empty frame)."""
    if n < 256:
        if n < 0:
            raise LocalProtocolError(f"uint {n} is negative")
        return _SMALL_UINTS[n]
    if n > MAX_SAFE_INTEGER:
        raise LocalProtocolError(f"uint {n} exceeds 2^53-1, which the reference cannot read")
    return n.to_bytes((n.bit_length() + 7) >> 3, "little")


def decode_uint(frame: bytes, frame_no: int) -> int:
    """Read the whole frame as a little-endian number (any length >= 1, like the reference)."""
    size = len(frame)
    if size <= 6:  # fast path: at most 2^48-1, always in range
        if size == 0:
            raise RemoteProtocolError("empty uint frame", frame_no)
        return int.from_bytes(frame, "little")
    # Long (non-minimal) encodings are legal as long as the value stays <= 2^53-1. Checking
    # the high bytes first keeps a huge frame from being turned into a huge Python int.
    if frame.count(0, 7) != size - 7:
        raise RemoteProtocolError("uint exceeds 2^53-1", frame_no)
    value = int.from_bytes(frame[:7], "little")
    if value > MAX_SAFE_INTEGER:
        raise RemoteProtocolError("uint exceeds 2^53-1", frame_no)
    return value


def encode_nuint(n: int | None) -> bytes:
    """``None`` is the empty frame; anything else as :func:`encode_uint`."""
    return EMPTY_FRAME if n is None else encode_uint(n)


def decode_nuint(frame: bytes, frame_no: int) -> int | None:
    """An optional unsigned frame: empty means None (the reference's "no value")."""
    return None if not frame else decode_uint(frame, frame_no)


# --- peer msgid (§6) -----------------------------------------------------------------------


def encode_msg_id(n: int) -> bytes:
    """A request's msgid frame: 24 bits, as the reference peers count (docs/protocol.md §6)."""
    if not 0 <= n < MSG_ID_MODULUS:
        raise LocalProtocolError(f"msgid {n} is outside 0..2^24-1")
    return encode_uint(n)


def decode_msg_id(frame: bytes, frame_no: int = 0) -> int:
    """A 1-3 byte msgid; the reference drops peer RPCs whose id frame is empty or longer."""
    if not 1 <= len(frame) <= 3:
        raise RemoteProtocolError(f"peer msgid must be 1-3 bytes, got {len(frame)}", frame_no)
    return int.from_bytes(frame, "little")


def next_msg_id(n: int) -> int:
    """The msgid following ``n`` (wraps from 2^24-1 to 0)."""
    return (n + 1) % MSG_ID_MODULUS


# --- bool (§2.2) ---------------------------------------------------------------------------


def encode_bool(value: bool) -> bytes:
    """A boolean frame as the reference encodes it (one byte, 0 or 1)."""
    return TRUE_FRAME if value else FALSE_FRAME


def decode_bool(frame: bytes) -> bool:
    """True iff the frame is non-empty and its *first* byte is non-zero (``00 01`` is false)."""
    return bool(frame) and frame[0] != 0


# --- string (§2.4) -------------------------------------------------------------------------


def encode_string(value: str) -> bytes:
    """A UTF-8 string frame; a string that cannot be encoded is a local bug, raised as such."""
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise LocalProtocolError(f"string {value!r} is not encodable as UTF-8") from None


def decode_string(frame: bytes, frame_no: int) -> str:
    """A UTF-8 string frame; bytes that are no UTF-8 are the sender's protocol error."""
    try:
        return frame.decode("utf-8")
    except UnicodeDecodeError:
        raise RemoteProtocolError("string frame is not valid UTF-8", frame_no) from None


# --- reqid (§3) and entries (§4.1) ---------------------------------------------------------


def decode_request_id(frame: bytes, frame_no: int) -> bytes:
    """A RequestUpdate/ConfigUpdate id frame: exactly 12 bytes (anything else is ignored)."""
    if len(frame) != REQUEST_ID_SIZE:
        raise RemoteProtocolError(
            f"request id must be {REQUEST_ID_SIZE} bytes, got {len(frame)}", frame_no
        )
    return bytes(frame)


def decode_entry(frame: bytes, frame_no: int) -> LogEntry:
    """A log-entry frame; a malformed one is the sender's protocol error (never fatal here)."""
    try:
        return LogEntry.from_bytes(frame)
    except EntryFormatError as exc:
        raise RemoteProtocolError(f"bad log entry: {exc}", frame_no) from None


# --- json = MessagePack (§2.3) -------------------------------------------------------------


def _to_reference_numbers(value: object) -> object:
    """Rewrite integers the way the reference's msgpack-lite writes them: int32 stays an
    integer, anything wider becomes a float64 (exact, since we refuse > 2^53-1). This makes our
    json frames byte-identical to the reference's (docs/protocol.md §2.3, §16: ``2^31`` is
    ``cb 41 e0 ...``).
    """
    if type(value) is int:
        if _MSGPACK_INT32_MIN <= value <= _MSGPACK_INT32_MAX:
            return value
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return float(value)
        raise LocalProtocolError(f"integer {value} exceeds 2^53-1, which the reference cannot read")
    if isinstance(value, list | tuple):
        return [_to_reference_numbers(item) for item in value]
    if isinstance(value, dict):
        return {key: _to_reference_numbers(item) for key, item in value.items()}
    return value


def pack_json(value: object) -> bytes:
    """Encode one value as MessagePack the way the reference does (str as str, not bin)."""
    if value is None:
        return JSON_NULL
    if type(value) is int and 0 <= value <= _MSGPACK_INT32_MAX:  # an index, a term: hot path
        small: bytes = _PACK_INT(value)
        return small
    converted = _to_reference_numbers(value)
    try:
        packed: bytes = msgpack.packb(converted, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise LocalProtocolError(f"value cannot be encoded as MessagePack: {exc}") from None
    return packed


encode_json = pack_json
"""Alias named after the frame type (``json``), pairing with :func:`decode_json`."""


class JsonDecodeError(ValueError):
    """A MessagePack value could not be decoded (raised by :func:`unpack_json`)."""


def _check_depth(value: object) -> None:
    """Reject nesting deeper than MAX_JSON_DEPTH, iteratively (no recursion to exhaust)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise JsonDecodeError(f"MessagePack value nested deeper than {MAX_JSON_DEPTH}")
        if isinstance(item, list):
            stack.extend((child, depth + 1) for child in item if isinstance(child, list | dict))
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, tuple):  # array keys come back as tuples
                    stack.append((list(key), depth + 1))
                if isinstance(child, list | dict):
                    stack.append((child, depth + 1))


def unpack_json(data: bytes) -> object:
    """Decode exactly one bounded MessagePack value; raises :class:`JsonDecodeError`.

    Used for json frames and for CONFIG entry data (which may come from disk as well as from
    the wire, so the error type is not tied to the network).
    """
    if not data:
        raise JsonDecodeError("empty MessagePack value")
    if len(data) > MAX_JSON_FRAME_SIZE:
        raise JsonDecodeError(f"MessagePack value of {len(data)} bytes is too large")
    try:
        value: object = msgpack.unpackb(
            data,
            raw=False,
            strict_map_key=False,
            use_list=True,
            max_str_len=MAX_JSON_FRAME_SIZE,
            max_bin_len=MAX_JSON_FRAME_SIZE,
            max_array_len=_MAX_JSON_CONTAINER_LEN,
            max_map_len=_MAX_JSON_CONTAINER_LEN,
            max_ext_len=MAX_JSON_FRAME_SIZE,
        )
    except (ValueError, TypeError, OverflowError, RecursionError, msgpack.UnpackException) as exc:
        # ExtraData, FormatError, StackError, truncated data, invalid UTF-8 (ValueError), an
        # unhashable map key (TypeError), a bad timestamp extension (ValueError/OverflowError).
        raise JsonDecodeError(f"invalid MessagePack: {type(exc).__name__}: {exc}") from None
    if isinstance(value, list | dict):
        _check_depth(value)
    return value


def decode_json(frame: bytes, frame_no: int) -> object:
    """A json frame that is present must hold one complete MessagePack value."""
    if frame == JSON_NULL:  # the most common json frame by far
        return None
    try:
        return unpack_json(frame)
    except JsonDecodeError as exc:
        raise RemoteProtocolError(str(exc), frame_no) from None


def json_to_uint(value: object, frame_no: int, what: str) -> int:
    """A number from a json frame used as an index/size: the reference writes numbers >= 2^31
    as float64, so integral doubles are accepted; negatives, fractions, NaN/inf and values
    above 2^53-1 are not."""
    if type(value) is int:
        number = value
    elif type(value) is float:
        if not math.isfinite(value) or not value.is_integer():
            raise RemoteProtocolError(f"{what} must be an integer, got {value!r}", frame_no)
        number = int(value)
    else:
        raise RemoteProtocolError(f"{what} must be a number, got {type(value).__name__}", frame_no)
    if not 0 <= number <= MAX_SAFE_INTEGER:
        raise RemoteProtocolError(f"{what} {number} is outside 0..2^53-1", frame_no)
    return number


def json_to_optional_str(value: object, frame_no: int, what: str) -> str | None:
    """A peer id in a json frame: MessagePack str or nil."""
    if value is None or type(value) is str:
        return value
    raise RemoteProtocolError(
        f"{what} must be a string or nil, got {type(value).__name__}", frame_no
    )
