"""A record batch's records as columns, without building a ``Record`` per record.

Why: for the Spark source every record becomes one row of column arrays, so building a
``Record`` object per record (``raftlog.topics.records.decode_entry``) and then reading its fields
back is most of a task's CPU time. :func:`record_columns` unpacks the MessagePack body once
and transposes it. It accepts exactly the plain batches that ``decode_entry`` accepts on its
fast path -- every field of the exact expected type, each distinct topic name checked with
``check_topic_name`` -- and returns None for anything else, so the caller falls back to
``decode_entry``, which stays the one authority on the format (errors, odd but valid input).
"""

from __future__ import annotations

from typing import Any, Final

import msgpack

from raftlog.topics.records import (
    FLAG_AUTO_CREATE,
    FLAGS_OFFSET,
    HEADER_SIZE,
    MAX_POSITION,
    MAX_UINT,
    VERSION,
    RecordFormatError,
    check_topic_name,
)

VERSION_OFFSET: Final = 4
RECORD_FIELDS: Final = 5
_NONE: Final = type(None)

Columns = tuple[tuple[Any, ...], tuple[Any, ...], tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]
"""(topics, keys, values, headers, producer timestamps), one item per record."""


def record_columns(data: bytes) -> Columns | None:
    """The columns of the record batch entry ``data`` (kind already checked by the caller),
    or None: not a plain batch, let ``decode_entry`` decide."""
    if data[VERSION_OFFSET] != VERSION or data[FLAGS_OFFSET] & ~FLAG_AUTO_CREATE:
        return None
    try:
        body = msgpack.unpackb(
            memoryview(data)[HEADER_SIZE:], raw=False, strict_map_key=True, use_list=True
        )
    except (ValueError, TypeError, OverflowError, RecursionError, msgpack.UnpackException):
        return None
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
