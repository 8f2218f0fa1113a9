"""Kafka offsets of raftlog records: a pure function of the record id, with gaps.

A record's id is ``(log index, position in the entry)``. Its Kafka offset is
``index << POSITION_BITS | position``: every peer computes the same offset for the same
record without any replicated counter, a native ``RecordId`` converts both ways, and the
order of offsets is the log order every reader sees. The price is gaps (offsets that hold
no record of the topic): Kafka clients accept them (compacted topics and transaction
markers make them too). docs/kafka.md argues the choice against dense offsets.

``POSITION_BITS = 22``: an entry holds at most ``max_log_entry_data_size`` bytes and a record
takes at least 8 of them, so no entry below 32 MiB can hold 2^22 records; the index then has
41 bits (2.2e12 entries: 70 years at 1,000 entries a second).
"""

from __future__ import annotations

from typing import Final

from raftlog.topics.records import RecordId

POSITION_BITS: Final = 22
MAX_POSITION: Final = (1 << POSITION_BITS) - 1
MAX_ENTRY_BYTES: Final = 8 << POSITION_BITS
"""The largest ``max_log_entry_data_size`` whose entries cannot overflow the position bits."""


def offset_of(record: RecordId) -> int:
    """The Kafka offset of the record with id ``record``."""
    return (record.index << POSITION_BITS) | record.position


def record_at(offset: int) -> RecordId:
    """The record id a Kafka offset names (the first record at or after it, for a read)."""
    if offset < 0:
        raise ValueError(f"negative offset {offset}")
    return RecordId(offset >> POSITION_BITS, offset & MAX_POSITION)
