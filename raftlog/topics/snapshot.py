"""The topic machine's part of a peer snapshot: topic metadata and the log clock (#11).

Records are not in the snapshot: the log is never compacted past a retained record
(``TopicStateMachine.compaction_limit``), so a peer that installs a snapshot receives every
retained record as an ordinary log entry after it. What the snapshot must carry is what the
compacted prefix decided: which topics exist as of the snapshot index (their properties and
creation index), each topic's low-water mark -- raised past every record at or below the
snapshot index, since the restoring peer will never see those -- and the log clock there.
Compacted topics (#29) are the exception that pins nothing: their live records are in
section ``"compacted"`` (``raftlog.topics.compacted``). Consumer groups (#27) are in section
``"groups"`` (``raftlog.topics.groups.host``). A section this code does not know is ignored.
It also carries the transactions open at the snapshot index with their stores' data (#18;
``topic_tx``): normally none, as log compaction stops before any open transaction.
"""

from __future__ import annotations

from typing import Any, Final

import msgpack

from raftlog.topics.state import TopicState, decode_state

SNAPSHOT_VERSION: Final = 4
"""4: version 3 plus optional sections (``"compacted"``: the live records of compacted
topics, issue #29; ``"groups"``: consumer groups, issue #27); 3: each topic's state is the
named map of ``state.encode_state`` (1 and 2, positional lists, are still read)."""
READABLE: Final = (1, 2, 3, SNAPSHOT_VERSION)


def parse_snapshot(
    data: bytes,
) -> tuple[dict[str, TopicState], int, list[list[Any]], dict[str, Any]]:
    """``(topics, log clock, open transactions, optional sections)`` of a snapshot (section
    ``"compacted"`` always present, a map; ``"groups"`` when written). Empty
    data (a snapshot from before topics existed) is an empty state; anything else must be our
    format: restoring garbage silently would lose topics."""
    if not data:
        return {}, 0, [], {}
    body = msgpack.unpackb(data, raw=False)
    if not isinstance(body, dict) or body.get("v") not in READABLE:
        raise ValueError("unsupported topic snapshot format")
    topics = {name: decode_state(fields) for name, fields in body["topics"].items()}
    open_transactions = body.get("tx", [])
    if not isinstance(open_transactions, list):
        raise ValueError("unsupported topic snapshot format (transactions)")
    sections = {k: v for k, v in body.items() if k not in ("v", "topics", "tx", "time")}
    compacted = sections.setdefault("compacted", {})
    if not isinstance(compacted, dict):
        raise ValueError("unsupported topic snapshot format (compacted)")
    return topics, int(body["time"]), open_transactions, sections


def snapshot_part(data: bytes, name: str) -> bytes:
    """This machine's part of a ``CompositeStateMachine`` snapshot (b"" when absent)."""
    try:
        value = msgpack.unpackb(data, raw=False) if data else {}
    except (ValueError, msgpack.UnpackException):
        return b""
    part = value.get(name) if isinstance(value, dict) else None
    return part if isinstance(part, bytes) else b""
