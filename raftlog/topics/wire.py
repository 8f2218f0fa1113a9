"""Topic RPCs: custom message types of two bytes (docs/protocol.md §10.6), pure frame codecs.

Requests use the common layout ``[id, type, ident, args...]`` (§5.1); responses are
``[id, ...]`` with the id echoed. ``json`` below is one MessagePack value (str as str,
bytes as bin), as in the core protocol -- including its convention that numbers >= 2^31 may
travel as float64 (decoders accept integral doubles); record frames use plain integers.

``TP`` publish -- leader only; exactly RequestUpdate (§10.3) plus one answer: its frames and
their codecs live in ``raftlog.topics.wire_publish``.

``TR`` read -- any peer:

    request   [id, "TR", ident, json {topic, from_index?, from_position?, from_time?,
                                      inclusive?, limit?, wait?}]
    response  [id, 01, json {applied, leader, more}, json record ...]
              [id, "", json error]

  each record ``[index, position, append_time, topic, key, value, headers, timestamp]``
  (+ ``ttl_ms`` if it has one). Start: ``from_index`` (+ ``from_position``), ``from_time``
  (append time, ms), or neither (oldest retained record); ``inclusive`` (default true).
  ``more``: cut by ``limit`` or the size budget; continue after the last id. A
  ``from_index`` below what retention removed: ``RecordsExpired`` + ``first_available``.
  ``wait`` (ms, at most ``MAX_READ_WAIT_MS``): when nothing matches, the peer holds the
  answer until it applies a record that does, or ``wait`` passes (then the empty answer):
  a follower that is caught up parks instead of polling. Sent only when non-zero, so a
  request without it is what it always was.

``TD`` describe -- any peer:  ``[id, "TD", ident, topic]`` -> ``[id, 01, json info]`` or
``[id, "", json error]``; info: the properties, ``created_index``, ``first``/``last``
retained record (``[index, position]`` or nil), ``last_append_time``, ``low_water`` (after
the last record retention removed), ``published_bytes``, ``log_clock`` and ``applied``.

``TL`` list -- any peer: ``[id, "TL", ident]`` -> ``[id, 01, json [name, ...]]`` (sorted).

Errors are ``{name, message}`` maps; names are ``raftlog.topics.records.TopicError`` codes, plus
``BadRequest`` for a malformed request. Consistency: a peer answers from its own applied
state by default; ``min_index`` / ``linearizable`` ask for more (``raftlog.topics.wire_reads``:
the peer takes them off and holds the read until the level is met; docs/client.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgpack

from raftlog.errors import RemoteProtocolError
from raftlog.rpc.frames import (
    TRUE_FRAME,
    decode_json,
    json_to_uint,
    pack_json,
)
from raftlog.topics.records import (
    MAX_POSITION,
    MAX_UINT,
    PROPERTY_NAMES,
    LoggedRecord,
    Record,
    RecordFormatError,
    RecordId,
    TopicError,
    TopicProperties,
    check_properties,
    check_record,
    check_topic_name,
)
from raftlog.topics.wire_errors import check_status, record_id

TYPE_PUBLISH: Final = b"TP"
TYPE_READ: Final = b"TR"
TYPE_DESCRIBE: Final = b"TD"
TYPE_LIST: Final = b"TL"
TOPIC_TYPES: Final = frozenset({TYPE_PUBLISH, TYPE_READ, TYPE_DESCRIBE, TYPE_LIST})
DEFAULT_READ_LIMIT: Final = 1000
MAX_READ_LIMIT: Final = 10_000
MAX_READ_WAIT_MS: Final = 30_000
"""The longest ``wait`` of a ``TR`` read."""
_READ_KEYS: Final = frozenset(
    {"topic", "from_index", "from_position", "from_time", "inclusive", "limit", "wait"}
)


def bad_request(message: str) -> TopicError:
    return TopicError("BadRequest", message)


@dataclass(frozen=True, slots=True)
class ReadRequest:
    topic: str
    from_index: int | None = None
    from_position: int | None = None
    """With ``from_index``: the record position to start at; None means the whole entry."""
    from_time_ms: int | None = None
    inclusive: bool = True
    limit: int = DEFAULT_READ_LIMIT
    wait_ms: int = 0
    """Hold an empty answer up to this long for a matching record (0: answer at once)."""

    def __post_init__(self) -> None:
        check_topic_name(self.topic)
        if type(self.wait_ms) is not int or not 0 <= self.wait_ms <= MAX_READ_WAIT_MS:
            raise bad_request(f"wait must be an integer in 0 .. {MAX_READ_WAIT_MS}")
        if self.from_index is not None and self.from_time_ms is not None:
            raise bad_request("give from_index or from_time, not both")
        if self.from_position is not None and self.from_index is None:
            raise bad_request("from_position needs from_index")
        for name in ("from_index", "from_time_ms"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or not 0 <= value <= MAX_UINT):
                raise bad_request(f"{name} must be an integer in 0 .. 2^53-1")
        pos = self.from_position
        if pos is not None and (type(pos) is not int or not 0 <= pos <= MAX_POSITION):
            raise bad_request("from_position must be an integer in 0 .. 2^32-1")
        if type(self.limit) is not int or not 1 <= self.limit <= MAX_READ_LIMIT:
            raise bad_request(f"limit must be an integer in 1 .. {MAX_READ_LIMIT}")
        if type(self.inclusive) is not bool:
            raise bad_request("inclusive must be true or false")


@dataclass(frozen=True, slots=True)
class ReadResult:
    records: tuple[LoggedRecord, ...]
    applied: int
    """The responder's applied index: everything up to it was considered."""
    is_leader: bool
    more: bool
    """Cut by the limit or the size budget: more records may follow the last one."""
    resume_at: RecordId | None = None
    """The read stopped passing over unreadable records here (``SkipBudget``): nothing
    before it is left to read, and more may follow from it."""


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    properties: TopicProperties
    created_index: int
    first: RecordId | None = None
    last: RecordId | None = None
    last_append_time_ms: int | None = None
    low_water: RecordId | None = None  # after the last record retention removed
    published_bytes: int = 0
    log_clock_ms: int = 0  # what retention compares against, as of ``applied``
    applied: int = 0


# --- shared pieces -------------------------------------------------------------------------


def _unpack(frame: bytes, frame_no: int) -> object:
    """One MessagePack value of any size (record frames may exceed the 1 MiB json bound of
    the core codec; msgpack bounds container sizes by the frame length itself)."""
    try:
        value: object = msgpack.unpackb(frame, raw=False, strict_map_key=False)
    except (ValueError, TypeError, OverflowError, RecursionError, msgpack.UnpackException) as exc:
        raise RemoteProtocolError(f"invalid MessagePack: {exc}", frame_no) from None
    return value


# --- TR read -------------------------------------------------------------------------------


def encode_read_request(req: ReadRequest) -> list[bytes]:
    body: dict[str, object] = {"topic": req.topic, "inclusive": req.inclusive, "limit": req.limit}
    if req.from_index is not None:
        body["from_index"] = req.from_index
        if req.from_position is not None:
            body["from_position"] = req.from_position
    if req.from_time_ms is not None:
        body["from_time"] = req.from_time_ms
    if req.wait_ms:
        body["wait"] = req.wait_ms
    return [pack_json(body)]


def decode_read_request(args: Sequence[bytes]) -> ReadRequest:
    """The server side; a malformed request raises ``TopicError`` (answered, not dropped)."""
    if len(args) != 1:
        raise bad_request(f"a read request has one argument frame, got {len(args)}")
    try:
        body = decode_json(args[0], 3)
    except RemoteProtocolError as exc:
        raise bad_request(str(exc)) from None
    if not isinstance(body, dict) or "topic" not in body:
        raise bad_request("a read request is a map with at least a topic")
    unknown = set(body) - _READ_KEYS
    if unknown:
        raise bad_request(f"unknown read request keys: {sorted(map(str, unknown))}")
    return ReadRequest(
        topic=body["topic"],
        from_index=_integral(body.get("from_index")),
        from_position=_integral(body.get("from_position")),
        from_time_ms=_integral(body.get("from_time")),
        inclusive=body.get("inclusive", True),
        limit=_integral(body.get("limit", DEFAULT_READ_LIMIT)),
        wait_ms=_integral(body.get("wait", 0)),
    )


def _integral(value: Any) -> Any:
    """json frames carry numbers >= 2^31 as float64 (the reference's convention, which
    ``pack_json`` follows): an integral double is that integer; anything else is left for
    ``ReadRequest`` to refuse."""
    if type(value) is float and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def encode_record(item: LoggedRecord) -> bytes:
    r = item.record
    value = [
        item.id.index,
        item.id.position,
        item.append_time_ms,
        r.topic,
        r.key,
        None if r.tombstone else r.value,  # nil: a tombstone, as in the entry format
        dict(r.headers),
        r.timestamp_ms,
    ]
    if r.ttl_ms is not None:
        value.append(r.ttl_ms)
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


def encode_read_response(result: ReadResult) -> list[bytes]:
    meta: dict[str, object] = {
        "applied": result.applied,
        "leader": result.is_leader,
        "more": result.more,
    }
    if result.resume_at is not None:
        meta["resume"] = [result.resume_at.index, result.resume_at.position]
    return [TRUE_FRAME, pack_json(meta), *(encode_record(r) for r in result.records)]


def decode_read_response(frames: Sequence[bytes]) -> ReadResult:
    """The frames after the id; an error answer raises its ``TopicError``."""
    check_status(frames, 1)
    meta = decode_json(frames[1], 1)
    if not isinstance(meta, dict):
        raise RemoteProtocolError("read meta must be a map", 1)
    applied = json_to_uint(meta.get("applied"), 1, "applied")
    records = tuple(_decode_record(f, n) for n, f in enumerate(frames[2:], start=2))
    more = meta.get("more") is True
    return ReadResult(records, applied, meta.get("leader") is True, more, resume_of(meta))


def resume_of(meta: Mapping[str, Any]) -> RecordId | None:
    """Where a read answer's walk stopped (its meta's ``resume``; None: absent or odd)."""
    raw = meta.get("resume")
    if not isinstance(raw, list) or len(raw) != 2:
        return None
    index, position = (_integral(value) for value in raw)
    if type(index) is not int or type(position) is not int or index < 0 or position < 0:
        return None
    return RecordId(index, position)


def _decode_record(frame: bytes, frame_no: int) -> LoggedRecord:
    value = _unpack(frame, frame_no)
    if not isinstance(value, list) or not 8 <= len(value) <= 9:
        raise RemoteProtocolError("a record is an 8- or 9-element array", frame_no)
    index, position, append_time, topic, key, data, headers, timestamp = value[:8]
    ttl = value[8] if len(value) == 9 else None
    record = Record(topic, data or b"", key, headers, timestamp, ttl, data is None)
    try:
        if not isinstance(headers, dict):
            raise RecordFormatError("headers must be a map")
        check_record(record)
    except RecordFormatError as exc:
        raise RemoteProtocolError(exc.message, frame_no) from None
    return LoggedRecord(
        RecordId(
            json_to_uint(index, frame_no, "index"), json_to_uint(position, frame_no, "position")
        ),
        json_to_uint(append_time, frame_no, "append time"),
        record,
    )


# --- TD describe / TL list -----------------------------------------------------------------


def decode_describe_request(args: Sequence[bytes]) -> str:
    if len(args) != 1:
        raise bad_request("a describe request has one argument frame: the topic name")
    try:
        name = args[0].decode()
    except UnicodeDecodeError:
        raise bad_request("the topic name is not UTF-8") from None
    return check_topic_name(name)


def encode_describe_response(info: TopicInfo) -> list[bytes]:
    body = {
        "name": info.name,
        **info.properties.as_dict(),
        "created_index": info.created_index,
        "first": None if info.first is None else [info.first.index, info.first.position],
        "last": None if info.last is None else [info.last.index, info.last.position],
        "last_append_time": info.last_append_time_ms,
        "low_water": None
        if info.low_water is None
        else [info.low_water.index, info.low_water.position],
        "published_bytes": info.published_bytes,
        "log_clock": info.log_clock_ms,
        "applied": info.applied,
    }
    return [TRUE_FRAME, pack_json(body)]


def decode_describe_response(frames: Sequence[bytes]) -> TopicInfo:
    check_status(frames, 1)
    body = decode_json(frames[1], 1)
    if not isinstance(body, dict) or not isinstance(body.get("name"), str):
        raise RemoteProtocolError("topic info must be a map with a name", 1)
    def optional(key: str) -> int | None:
        value = body.get(key)
        return None if value is None else json_to_uint(value, 1, key)
    try:  # every property by its kind: a new property needs no change here
        props = check_properties({n: body.get(n) for n in PROPERTY_NAMES}, "update")
    except TopicError as exc:
        raise RemoteProtocolError(str(exc), 1) from None
    return TopicInfo(
        name=body["name"],
        properties=TopicProperties().updated(props),
        created_index=json_to_uint(body.get("created_index"), 1, "created_index"),
        first=record_id(body.get("first"), 1),
        last=record_id(body.get("last"), 1),
        last_append_time_ms=optional("last_append_time"),
        low_water=record_id(body.get("low_water"), 1),
        published_bytes=optional("published_bytes") or 0,
        log_clock_ms=optional("log_clock") or 0,
        applied=optional("applied") or 0,
    )


def encode_list_request(patterns: Sequence[str] | None = None) -> list[bytes]:
    """``TL``'s arguments: none (every topic), or one JSON frame of topic names and
    ``prefix*`` patterns -- the listing then holds only the topics matching one of them. On
    a CURVE cluster the request guard puts the key's read ACL there (issue #25), so a key
    never learns the names of topics it may not read."""
    return [] if patterns is None else [pack_json(list(patterns))]


def decode_list_request(args: Sequence[bytes]) -> tuple[str, ...] | None:
    """The patterns of a ``TL`` request (None: every topic); ``BadRequest`` when malformed."""
    if not args:
        return None
    if len(args) != 1:
        raise bad_request("TL takes no frame or one: a JSON array of topic patterns")
    try:
        patterns = decode_json(args[0], 0)
    except RemoteProtocolError:
        patterns = None
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise bad_request("the TL filter must be a JSON array of names and 'prefix*' patterns")
    return tuple(patterns)


def encode_list_response(names: Sequence[str]) -> list[bytes]:
    return [TRUE_FRAME, pack_json(sorted(names))]


def decode_list_response(frames: Sequence[bytes]) -> tuple[str, ...]:
    check_status(frames, 1)
    names = decode_json(frames[1], 1)
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise RemoteProtocolError("a topic list is an array of names", 1)
    return tuple(names)
