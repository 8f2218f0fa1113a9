"""The key-value view's read requests (issue #29): ``KG`` get and ``KK`` keys.

Both name a compacted topic in their first frame (so the topic ACL check reads it exactly as
``TD``'s), are answered by the topic state machine of the receiving peer from its applied
state, and answer an error map like every topic read (``raftlog.topics.wire_errors``):

* ``KG`` ``[topic, key]`` -> ``[01, {applied, leader}, record?]``: the key's live record
  (the ``TR`` record frame, ``raftlog.topics.wire.encode_record``), absent when the key has
  none (never written, deleted, or expired);
* ``KK`` ``[topic, {prefix: bin, after: bin | nil, limit: uint}]`` ->
  ``[01, {applied, leader, more, keys: [[key, index, position], ...]}]``: live keys with
  ``prefix`` in byte order after ``after``, each with its revision (the id of its record).

Writes need no request type of their own: a put is a keyed record, a delete a tombstone
(nil value), both published with ``TP``; a watch is a ``TR`` read of the compacted topic
filtered by key prefix (``raftlog.topics.kv``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import msgpack

from raftlog.errors import RemoteProtocolError
from raftlog.rpc.frames import TRUE_FRAME, decode_json, json_to_uint, pack_json
from raftlog.topics.records import LoggedRecord, RecordId, check_topic_name
from raftlog.topics.wire import _decode_record, _unpack, bad_request, encode_record
from raftlog.topics.wire_errors import check_status

TYPE_KV_GET: Final = b"KG"
TYPE_KV_KEYS: Final = b"KK"
MAX_KEY_BYTES: Final = 64 * 1024
"""Largest key or prefix a request may name."""
MAX_KEYS_LIMIT: Final = 10_000
DEFAULT_KEYS_LIMIT: Final = 1000


@dataclass(frozen=True, slots=True)
class KeysRequest:
    """``KK``: live keys of ``topic`` starting with ``prefix``, after ``after``."""

    topic: str
    prefix: bytes = b""
    after: bytes | None = None
    limit: int = DEFAULT_KEYS_LIMIT


@dataclass(frozen=True, slots=True)
class GetResult:
    """``KG``'s answer: the record (None: no live value) and the answering peer's state."""

    record: LoggedRecord | None
    applied: int
    is_leader: bool


@dataclass(frozen=True, slots=True)
class KeysResult:
    """``KK``'s answer: ``(key, revision)`` pairs in key order."""

    keys: tuple[tuple[bytes, RecordId], ...]
    more: bool
    applied: int
    is_leader: bool
    resume_after: bytes | None = None
    """The walk stopped passing over dead keys after this one (``more`` then): a peer goes
    on from it itself when it found no key (``raftlog.server.continued_reads``)."""


def _topic(frame: bytes) -> str:
    try:
        return check_topic_name(frame.decode())
    except UnicodeDecodeError:
        raise bad_request("the topic name is not UTF-8") from None


def _key(value: object, what: str) -> bytes:
    if type(value) is not bytes or len(value) > MAX_KEY_BYTES:
        raise bad_request(f"{what} must be bytes of at most {MAX_KEY_BYTES}")
    return value


def encode_get_request(topic: str, key: bytes) -> list[bytes]:
    """The argument frames of ``KG``."""
    return [check_topic_name(topic).encode(), _key(key, "the key")]


def decode_get_request(args: Sequence[bytes]) -> tuple[str, bytes]:
    """``(topic, key)`` of ``KG`` (``BadRequest`` when malformed)."""
    if len(args) != 2:
        raise bad_request("KG takes two frames: the topic name and the key")
    return _topic(args[0]), _key(bytes(args[1]), "the key")


def encode_get_response(result: GetResult) -> list[bytes]:
    """The answer frames of ``KG``."""
    meta = pack_json({"applied": result.applied, "leader": result.is_leader})
    record = [] if result.record is None else [encode_record(result.record)]
    return [TRUE_FRAME, meta, *record]


def decode_get_response(frames: Sequence[bytes]) -> GetResult:
    """``KG``'s answer (an error answer raises its ``TopicError``)."""
    check_status(frames, 1)
    if len(frames) > 3:
        raise RemoteProtocolError("a KG answer has at most three frames")
    meta = decode_json(frames[1], 1)
    if not isinstance(meta, dict):
        raise RemoteProtocolError("KG meta must be a map", 1)
    record = _decode_record(frames[2], 2) if len(frames) == 3 else None
    applied = json_to_uint(meta.get("applied"), 1, "applied")
    return GetResult(record, applied, meta.get("leader") is True)


def encode_keys_request(req: KeysRequest) -> list[bytes]:
    """The argument frames of ``KK``."""
    body = {"prefix": _key(req.prefix, "prefix"), "after": req.after, "limit": req.limit}
    if req.after is not None:
        _key(req.after, "after")
    return [check_topic_name(req.topic).encode(), msgpack.packb(body, use_bin_type=True)]


def decode_keys_request(args: Sequence[bytes]) -> KeysRequest:
    """``KK``'s request (``BadRequest`` when malformed)."""
    if len(args) != 2:
        raise bad_request("KK takes two frames: the topic name and {prefix, after, limit}")
    topic = _topic(args[0])
    try:
        body = _unpack(args[1], 1)
    except RemoteProtocolError as exc:
        raise bad_request(str(exc)) from None
    if not isinstance(body, dict):
        raise bad_request("KK's second frame is a map {prefix, after, limit}")
    after = body.get("after")
    limit = body.get("limit", DEFAULT_KEYS_LIMIT)
    if type(limit) is not int or not 1 <= limit <= MAX_KEYS_LIMIT:
        raise bad_request(f"limit must be an integer in 1 .. {MAX_KEYS_LIMIT}")
    return KeysRequest(
        topic,
        _key(body.get("prefix", b""), "prefix"),
        None if after is None else _key(after, "after"),
        limit,
    )


def encode_keys_response(result: KeysResult) -> list[bytes]:
    """The answer frames of ``KK``."""
    body = {
        "applied": result.applied,
        "leader": result.is_leader,
        "more": result.more,
        "keys": [[key, rid.index, rid.position] for key, rid in result.keys],
    }
    if result.resume_after is not None:
        body["resume"] = result.resume_after
    return [TRUE_FRAME, msgpack.packb(body, use_bin_type=True)]


def decode_keys_response(frames: Sequence[bytes]) -> KeysResult:
    """``KK``'s answer (an error answer raises its ``TopicError``)."""
    check_status(frames, 1)
    body = _unpack(frames[1], 1)
    if not isinstance(body, dict) or not isinstance(body.get("keys"), list):
        raise RemoteProtocolError("a KK answer is a map with keys", 1)
    keys = []
    for item in body["keys"]:
        if not isinstance(item, list) or len(item) != 3 or type(item[0]) is not bytes:
            raise RemoteProtocolError("a KK key is [key, index, position]", 1)
        rid = RecordId(json_to_uint(item[1], 1, "index"), json_to_uint(item[2], 1, "position"))
        keys.append((item[0], rid))
    applied = json_to_uint(body.get("applied"), 1, "applied")
    resume = body.get("resume")
    return KeysResult(
        tuple(keys),
        body.get("more") is True,
        applied,
        body.get("leader") is True,
        resume if type(resume) is bytes else None,
    )


def stopped_keys(answer: Sequence[bytes]) -> bytes | None:
    """The key after which a ``KK`` answer without keys stopped (None: it has keys, is an
    error, or its walk ended): what a peer goes on from (``continued_reads``)."""
    try:
        result = decode_keys_response(answer)
    except Exception:  # an error answer: it goes as it is
        return None
    return None if result.keys else result.resume_after
