"""Conditional record batches (issue #29): a publish that applies only if the log is where
its writer expects it to be -- optimistic concurrency for event sourcing.

One more kind of topic entry (``raftlog.topics.records``; same 15-byte header, so a
reference peer replicates it as opaque STATE data):

* kind 08, conditional record batch: body ``[[expectation, ...], [record, ...]]``, records
  exactly as in a record batch (kind 01), each expectation ``[topic: str, key: bin | nil,
  last: [index, position] | nil]``:

  - key nil, last ``[i, p]``: the topic's last record is ``i:p`` ("expected last record id");
  - key nil, last nil: the topic has no record yet ("topic must be empty");
  - key set, last ``[i, p]``: the key's latest record in the topic is ``i:p``; last nil: the
    key has none alive (never written, or deleted and its tombstone expired). Per-key
    expectations need a compacted topic (``cleanup_policy`` ``compact``), whose key index
    the machine keeps (``raftlog.topics.compacted``).

Every expectation is checked by the topic state machine when it applies the entry, against
the state right before it, so with N writers racing at the same expectation exactly one
batch applies; the others are refused whole with ``ExpectationFailedError`` carrying the
current last id (``raftlog.topics.machine``). The leader does not pre-check: the decision is
the log's, taken identically on every peer. An older peer does not know kind 08 and skips
the entry as malformed, like any newer kind.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Final, TypeAlias

import msgpack

from raftlog.errors import RecordFormatError
from raftlog.topics.record_decode import _records
from raftlog.topics.records import (
    MAX_POSITION,
    Expectation,
    Record,
    RecordBatch,
    RecordId,
    _header,
    check_topic_name,
    check_uint,
    encode_records,
    records_body,
)


class NoRecord(enum.Enum):
    """The type of ``NO_RECORD``."""

    NO_RECORD = "none"


NO_RECORD: Final = NoRecord.NO_RECORD
"""An expected last id meaning "no record": the topic empty, or the key absent."""
Expected: TypeAlias = RecordId | NoRecord | None
"""A client's expectation: an id, ``NO_RECORD``, or None for no condition."""
KIND_CONDITIONAL: Final = 8
MAX_EXPECTATIONS: Final = 64
"""Expectations one batch may carry (each costs a lookup at apply)."""


def expectations(
    topic: str, key: bytes | None, last: Expected, key_last: Expected
) -> list[Expectation]:
    """The expectations of a single-record publish's keyword arguments."""
    out = []
    if last is not None:
        out.append(Expectation(topic, None if last is NO_RECORD else last))
    if key_last is not None:
        if key is None:
            raise ValueError("expect_key_last_id needs the record's key")
        out.append(Expectation(topic, None if key_last is NO_RECORD else key_last, key))
    return out


def encode_conditional(records: Sequence[Record], expect: Sequence[Expectation]) -> bytes:
    """The data of one STATE entry publishing ``records`` atomically if every expectation
    holds (a plain record batch when there is none)."""
    if not expect:
        return encode_records(records)
    encode_records(records)  # the same checks as a plain batch
    if len(expect) > MAX_EXPECTATIONS:
        raise RecordFormatError(f"at most {MAX_EXPECTATIONS} expectations per batch")
    conditions = [_encode_expectation(e) for e in expect]
    _check_topics(records, expect)
    packed: bytes = msgpack.packb([conditions, records_body(records)], use_bin_type=True)
    return _header(KIND_CONDITIONAL, 0, 0) + packed


def _encode_expectation(e: Expectation) -> list[object]:
    check_topic_name(e.topic)
    if e.key is not None and not isinstance(e.key, bytes):
        raise RecordFormatError("an expectation's key must be bytes or None")
    last = None if e.last is None else [e.last.index, e.last.position]
    if e.last is not None:
        check_uint(e.last.index, "expected index")
        check_uint(e.last.position, "expected position", MAX_POSITION)
    return [e.topic, e.key, last]


def decode_conditional(body: object, append_time: int, flags: int) -> RecordBatch:
    """The record batch of a kind-08 body (``RecordFormatError`` when malformed)."""
    if not isinstance(body, list) or len(body) != 2 or not isinstance(body[0], list):
        raise RecordFormatError("a conditional batch body is [[expectation, ...], [record, ...]]")
    conditions, records = body
    if not conditions or len(conditions) > MAX_EXPECTATIONS:
        raise RecordFormatError(f"a conditional batch has 1 .. {MAX_EXPECTATIONS} expectations")
    expect = tuple(_decode_expectation(item) for item in conditions)
    batch = RecordBatch(_records(records), append_time, flags, expect)
    _check_topics(batch.records, expect)
    return batch


def _check_topics(records: Sequence[Record], expect: Sequence[Expectation]) -> None:
    """An expectation names a topic the batch writes to: its writer's publish right on the
    topic covers what the refusal tells (the topic's last id)."""
    written = {r.topic for r in records}
    for e in expect:
        if e.topic not in written:
            raise RecordFormatError(
                f"an expectation names topic {e.topic!r}, which the batch does not write to"
            )


def _decode_expectation(item: object) -> Expectation:
    if not isinstance(item, list) or len(item) != 3:
        raise RecordFormatError("an expectation is [topic, key, last]")
    topic, key, last = item
    if key is not None and type(key) is not bytes:
        raise RecordFormatError("an expectation's key must be bin or nil")
    if last is None:
        return Expectation(check_topic_name(topic), None, key)
    if not isinstance(last, list) or len(last) != 2:
        raise RecordFormatError("an expectation's last id is [index, position] or nil")
    index = check_uint(last[0], "expected index")
    position = check_uint(last[1], "expected position", MAX_POSITION)
    return Expectation(check_topic_name(topic), RecordId(index, position), key)


def parse_record_id(text: str) -> RecordId | NoRecord:
    """An expected id as people write it -- ``INDEX:POSITION``, ``INDEX`` (position 0) or
    ``none`` (``NO_RECORD``: "no record") -- for the CLI and REST (``ValueError`` else)."""
    text = text.strip()
    if text.lower() in ("none", "null"):
        return NO_RECORD
    index, _, position = text.partition(":")
    rid = RecordId(int(index), int(position or 0))
    if rid.index < 0 or not 0 <= rid.position <= MAX_POSITION:
        raise ValueError(f"invalid record id {text!r}")
    return rid


__all__ = [
    "KIND_CONDITIONAL",
    "NO_RECORD",
    "Expected",
    "NoRecord",
    "expectations",
    "Expectation",
    "decode_conditional",
    "encode_conditional",
    "parse_record_id",
]
