"""The topic machine's part of a peer snapshot: topic metadata and the log clock (#11).

Records are not in the snapshot: the log is never compacted past a retained record
(``TopicStateMachine.compaction_limit``), so a peer that installs a snapshot receives every
retained record as an ordinary log entry after it. What the snapshot must carry is what the
compacted prefix decided: which topics exist as of the snapshot index (their properties and
creation index), each topic's low-water mark -- raised past every record at or below the
snapshot index, since the restoring peer will never see those -- and the log clock there.
It also carries the transactions open at the snapshot index with their stores' data (#18;
``topic_tx``): normally none, as log compaction stops before any open transaction.

Version 4 = version 3 + optional sections, each under its own key and absent when empty:
``"groups"`` (consumer groups, #27: ``raftlog.topics.groups.host``). Versions 1-4 are read;
a section this code does not know is ignored.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

import msgpack

from raftlog.topics.index import TopicIndex
from raftlog.topics.records import RecordId
from raftlog.topics.state import TopicState, decode_state, encode_state

SNAPSHOT_VERSION: Final = 4
"""3: each topic's state is the named map of ``state.encode_state`` (1 and 2, positional
lists, are still read); 4: plus optional sections (module docstring)."""
READABLE_VERSIONS: Final = (1, 2, 3, 4)


def build_snapshot(
    index_db: TopicIndex,
    index: int,
    base_time: int,
    open_transactions: list[list[Any]],
    sections: dict[str, Any] | None = None,
) -> bytes:
    """The snapshot as of log index ``index`` (the machine may have applied further: the
    metadata is versioned, and the clock comes from the entry-time index);
    ``open_transactions`` are those open at ``index`` (``TransactionTable.snapshot``)."""
    topics = index_db.topics_as_of(index)
    at = index_db.time_at(index)
    body: dict[str, Any] = {"v": SNAPSHOT_VERSION, "topics": {}}
    if open_transactions:  # absent otherwise: older peers read the snapshot as before
        body["tx"] = open_transactions
    body["time"] = base_time if at is None else at[1]
    for key, section in (sections or {}).items():
        if section is not None:
            body[key] = section
    for name, state in topics.items():
        low = state.low_water
        last = next(index_db.entries_before(name, index + 1), None)
        if last is not None and last.index >= state.created_index:
            low = max(low, RecordId(last.index, last.positions[-1] + 1))
        body["topics"][name] = encode_state(replace(state, low_water=low))
    packed: bytes = msgpack.packb(body)
    return packed


def parse_snapshot(data: bytes) -> tuple[dict[str, TopicState], int, list[list[Any]]]:
    """``(topics, log clock, open transactions)`` of a snapshot (``parse_snapshot_sections``
    without the sections)."""
    topics, clock, open_transactions, _ = parse_snapshot_sections(data)
    return topics, clock, open_transactions


def parse_snapshot_sections(
    data: bytes,
) -> tuple[dict[str, TopicState], int, list[list[Any]], dict[str, Any]]:
    """``(topics, log clock, open transactions, optional sections)`` of a snapshot. Empty
    data (a snapshot from before topics existed) is an empty state; anything else must be our
    format: restoring garbage silently would lose topics."""
    if not data:
        return {}, 0, [], {}
    body = msgpack.unpackb(data, raw=False)
    if not isinstance(body, dict) or body.get("v") not in READABLE_VERSIONS:
        raise ValueError("unsupported topic snapshot format")
    topics = {name: decode_state(fields) for name, fields in body["topics"].items()}
    open_transactions = body.get("tx", [])
    if not isinstance(open_transactions, list):
        raise ValueError("unsupported topic snapshot format (transactions)")
    sections = {k: v for k, v in body.items() if k not in ("v", "topics", "tx", "time")}
    return topics, int(body["time"]), open_transactions, sections


def snapshot_part(data: bytes, name: str) -> bytes:
    """This machine's part of a ``CompositeStateMachine`` snapshot (b"" when absent)."""
    try:
        value = msgpack.unpackb(data, raw=False) if data else {}
    except (ValueError, msgpack.UnpackException):
        return b""
    part = value.get(name) if isinstance(value, dict) else None
    return part if isinstance(part, bytes) else b""
