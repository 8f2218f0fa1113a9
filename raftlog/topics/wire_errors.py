"""Error answers of the topic RPCs (``raftlog.topics.wire``, ``raftlog.topics.wire_tx``):
``{name, message}`` maps, plus ``first_available`` for ``RecordsExpired``, ``txid`` for
the transaction errors and ``topic`` and ``last_id`` for ``ExpectationFailed``, decoded back
into the typed exceptions of ``raftlog.errors``."""

from __future__ import annotations

from collections.abc import Sequence

from raftlog.errors import (
    TRANSACTION_ERRORS,
    ExpectationFailedError,
    RecordsExpiredError,
    RemoteProtocolError,
    TopicError,
    TransactionError,
    transaction_error,
)
from raftlog.rpc.frames import FALSE_FRAME, decode_bool, decode_json, json_to_uint, pack_json
from raftlog.topics.records import RecordId


def error_map(error: TopicError) -> dict[str, object]:
    """The wire map of ``error``."""
    body: dict[str, object] = {"name": error.name, "message": error.message}
    if isinstance(error, RecordsExpiredError):
        body["first_available"] = list(error.first_available)
    if isinstance(error, TransactionError) and error.txid is not None:
        body["txid"] = error.txid
    if isinstance(error, ExpectationFailedError):  # issue #29: where the topic/key is now
        last = error.current_last
        body["topic"], body["last_id"] = error.topic, None if last is None else list(last)
    return body


def encode_error(error: TopicError) -> list[bytes]:
    """The frames of an error answer: ``["", {name, message, ...}]``."""
    return [FALSE_FRAME, pack_json(error_map(error))]


def error_from(value: object, frame_no: int) -> TopicError:
    """The typed exception of an error map (``RemoteProtocolError`` if it is not one)."""
    if not isinstance(value, dict):
        raise RemoteProtocolError("error must be a map", frame_no)
    name, message = value.get("name"), value.get("message")
    if not isinstance(name, str) or not isinstance(message, str):
        raise RemoteProtocolError("error needs string name and message", frame_no)
    if name == "RecordsExpired":
        first = record_id(value.get("first_available"), frame_no)
        if first is not None:
            return RecordsExpiredError(message, (first.index, first.position))
    if name == "ExpectationFailed" and isinstance(value.get("topic"), str):
        last = record_id(value.get("last_id"), frame_no)
        at = None if last is None else (last.index, last.position)
        return ExpectationFailedError(message, value["topic"], at)
    if name in TRANSACTION_ERRORS:
        txid = value.get("txid")
        return transaction_error(name, message, txid if isinstance(txid, str) else None)
    return TopicError(name, message)


def check_status(frames: Sequence[bytes], expect: int) -> None:
    """``[01, ...]`` with ``expect`` frames after the status, or raise the error answer."""
    if not frames:
        raise RemoteProtocolError("empty topic response")
    if not decode_bool(frames[0]):
        if len(frames) != 2:
            raise RemoteProtocolError("an error answer has exactly two frames")
        raise error_from(decode_json(frames[1], 1), 1)
    if len(frames) < expect + 1:
        raise RemoteProtocolError(f"expected at least {expect + 1} frames, got {len(frames)}")


def record_id(value: object, frame_no: int) -> RecordId | None:
    """A ``[index, position]`` frame value as a ``RecordId`` (nil: None)."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2:
        raise RemoteProtocolError("a record id is [index, position]", frame_no)
    return RecordId(
        json_to_uint(value[0], frame_no, "index"), json_to_uint(value[1], frame_no, "position")
    )
