"""A record batch's records as columns, without building a ``Record`` per record.

Why: for the Spark source every record becomes one row of column arrays, so building a
``Record`` object per record (``raftlog.topics.record_decode.decode_entry``) and then
reading its fields back is most of a task's CPU time. :func:`record_columns` unpacks the
MessagePack body once and transposes it. It accepts exactly the plain batches that
``decode_entry`` accepts on its fast path -- every field of the exact expected type, each
distinct topic name checked with ``check_topic_name`` -- and returns None for anything else,
so the caller falls back to ``decode_entry``, which stays the one authority on the format
(errors, odd but valid input).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgpack

from raftlog.topics.records import (
    FLAG_AUTO_CREATE,
    FLAGS_OFFSET,
    HEADER_SIZE,
    MAX_POSITION,
    MAX_UINT,
    VERSION,
    LoggedRecord,
    Record,
    RecordFormatError,
    check_topic_name,
)

VERSION_OFFSET: Final = 4
KIND_OFFSET: Final = 5
RECORD_FIELDS: Final = 5
_NONE: Final = type(None)

Columns = tuple[tuple[Any, ...], tuple[Any, ...], tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]
"""(topics, keys, values, headers, producer timestamps), one item per record."""


def columns_of(records: Sequence[Record]) -> Columns:
    """The columns of decoded records."""
    return (
        tuple(r.topic for r in records),
        tuple(r.key for r in records),
        tuple(r.value for r in records),
        tuple(r.headers for r in records),
        tuple(r.timestamp_ms for r in records),
    )


@dataclass(frozen=True, slots=True)
class CommitRows:
    """The rows a transaction commit makes visible, admitted ones only: their columns,
    their positions ``k`` (ids ``(commit index, k)``) and the commit's append time (ms, 0:
    none). Why columns: a commit holds up to thousands of records, each a row; added to a
    batch column by column like a record batch's (no object per record)."""

    columns: Columns
    positions: Sequence[int]
    append_ms: int

    @classmethod
    def pick(cls, columns: Columns, picked: Sequence[int], append_ms: int) -> CommitRows:
        """The rows at positions ``picked`` of ``columns``."""
        if len(picked) == len(columns[0]):
            return cls(columns, picked, append_ms)
        chosen = tuple(tuple(column[k] for k in picked) for column in columns)
        return cls(chosen, picked, append_ms)  # type: ignore[arg-type]

    @classmethod
    def of(cls, items: Sequence[LoggedRecord], append_ms: int) -> CommitRows:
        """The rows of records a ``TR`` read returned (all at the commit's append time)."""
        records = [item.record for item in items]
        positions = [item.id.position for item in items]
        stamp = items[0].append_time_ms if items else append_ms
        return cls(columns_of(records), positions, stamp)


def record_columns(data: bytes) -> Columns | None:
    """The columns of the record batch entry ``data`` (kind already checked by the caller),
    or None: not a plain batch, let ``decode_entry`` decide."""
    body = _body(data)
    return None if body is None else body_columns(body)


def store_columns(data: bytes) -> Columns | None:
    """The columns of the records of the transactional store entry ``data`` (kind 05,
    ``[txid, records(, actor)]``; kind checked by the caller), or None: not plain records,
    let ``decode_any_entry`` decide. Why: a commit's rows are built from its stores
    (:mod:`raftlog_spark.commit_map`), and a ``Record`` per stored record cost as much as
    the rest of the commit's rows together."""
    body = _body(data)
    if type(body) is not list or len(body) not in (2, 3) or type(body[0]) is not str:
        return None
    return body_columns(body[1])


def _body(data: bytes) -> Any:
    """The unpacked MessagePack body of a version-1 topic entry with no flag but
    AUTO_CREATE, or None."""
    if data[VERSION_OFFSET] != VERSION or data[FLAGS_OFFSET] & ~FLAG_AUTO_CREATE:
        return None
    try:
        return msgpack.unpackb(
            memoryview(data)[HEADER_SIZE:], raw=False, strict_map_key=True, use_list=True
        )
    except (ValueError, TypeError, OverflowError, RecursionError, msgpack.UnpackException):
        return None


def body_columns(body: Any) -> Columns | None:
    """The columns of an unpacked record batch body (a list of 5-field records), or None."""
    if type(body) is not list or not body or len(body) > MAX_POSITION + 1:
        return None
    if set(map(type, body)) != {list} or set(map(len, body)) != {RECORD_FIELDS}:
        return None  # (C-level checks: no Python code runs per record)
    topics, keys, values, headers, stamps = zip(*body, strict=True)
    if (
        set(map(type, values)) != {bytes}
        or not set(map(type, keys)) <= {bytes, _NONE}
        or set(map(type, stamps)) != {int}
        or min(stamps) < 0
        or max(stamps) > MAX_UINT
        or set(map(type, headers)) != {dict}
        or set(map(type, topics)) != {str}
    ):
        return None
    if any(headers):
        for named in headers:
            if named and (
                set(map(type, named)) != {str} or set(map(type, named.values())) != {bytes}
            ):
                return None
    try:
        for topic in set(topics):
            check_topic_name(topic)
    except (RecordFormatError, ValueError):
        return None
    return topics, keys, values, headers, stamps
