"""The leader's stamp on a topic entry: its append time and flags, set in the 15-byte
header without re-encoding the body (``raftlog.topics.records`` defines the header).

Why only the leader: the append time is the cluster clock as the leader saw it when it
accepted the entry, so every peer applies the same time; a client's own time stamp is the
record's ``timestamp_ms`` and never decides retention.
"""

from __future__ import annotations

from raftlog.topics.records import (
    FLAG_AUTO_CREATE,
    FLAGS_OFFSET,
    HEADER_SIZE,
    KIND_RECORDS,
    TIME_OFFSET,
    RecordFormatError,
    check_uint,
    is_topic_data,
)


def stamp_append_time(data: bytes, now_ms: int, *, auto_create: bool = False) -> bytes:
    """``data`` with the append time set to ``now_ms`` and the flags set by the leader
    (AUTO_CREATE on record batches when ``auto_create``; whatever a client sent is replaced,
    so only the leader's configuration decides). The body is not re-encoded."""
    if not is_topic_data(data) or len(data) <= HEADER_SIZE:
        raise RecordFormatError("not a topic entry")
    check_uint(now_ms, "append time")
    flags = FLAG_AUTO_CREATE if auto_create and data[5] in (KIND_RECORDS, 5) else 0  # 5: store
    return b"".join(
        (data[:FLAGS_OFFSET], bytes((flags,)), now_ms.to_bytes(8, "big"), data[HEADER_SIZE:])
    )


def append_time_of(data: bytes) -> int:
    """The append time field of topic entry ``data`` (0 if it is not one)."""
    if not is_topic_data(data) or len(data) < HEADER_SIZE:
        return 0
    return int.from_bytes(data[TIME_OFFSET:HEADER_SIZE], "big")


class AppendClock:
    """The leader's stamps never go back, even if the wall clock does (across leaders the
    state machine keeps the log clock monotonic: ``raftlog.topics.machine``)."""

    def __init__(self, last_ms: int = 0) -> None:
        self.last_ms = last_ms

    def stamp(self, data: bytes, now_ms: int, *, auto_create: bool = False) -> bytes:
        self.last_ms = max(self.last_ms, now_ms)
        return stamp_append_time(data, self.last_ms, auto_create=auto_create)
