"""What a transaction commit makes visible (issue #18): the plan a commit indexes, and the
records behind a commit entry as readers see them.

A commit's records are not copied anywhere: they stay in the transaction's store entries
(``t <commit>`` in the topic index lists them, ``topic_tx``), and record ``k`` of the
transaction -- store order, across topics -- has id ``(commit index, k)``.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from raftlog.errors import TopicError
from raftlog.topics.index import group_by_topic
from raftlog.topics.records import Record
from raftlog.topics.records_tx import TxStore
from raftlog.topics.state import TopicState


def gather_records(
    stores: Sequence[tuple[int, int]], read_store: Callable[[int], TxStore | None]
) -> list[Record] | None:
    """The records of ``stores`` in order, read back from the log (None: a store entry is
    not there any more -- only possible if the log was compacted past it).

    Read newest first: the reader keeps the stores its applies decoded, least recently used
    going first (``raftlog.topics.decoded_entries``); in log order, a transaction larger
    than what is kept evicted each store just before it was asked for, and all were decoded
    again (~100,000 records: 0.3 s of the loop)."""
    read = {index: read_store(index) for index, _ in reversed(stores)}
    out: list[Record] = []
    for index, count in stores:
        entry = read[index]
        if entry is None or len(entry.records) != count:
            return None
        out.extend(entry.records)
    return out


@dataclass(frozen=True, slots=True)
class CommitPlan:
    """What a commit indexes: each topic's positions (record ``k`` of the transaction is
    position ``k``) and bytes, and the TTLs to watch."""

    by_topic: dict[str, tuple[list[int], int]]
    ttls: list[int]


def plan_commit(
    stores: Sequence[tuple[int, int]],
    read_store: Callable[[int], TxStore | None],
    topics: Mapping[str, TopicState],
) -> CommitPlan | str:
    """The plan of a commit of ``stores``, or why the transaction must abort instead: a
    topic it wrote to was deleted (or deleted and created again) since the store -- all or
    nothing -- or the stores left the log (impossible under the compaction floor)."""
    records = gather_records(stores, read_store)
    if records is None:
        return "its stored records left the log"
    at = 0
    for store_index, count in stores:
        for record in records[at : at + count]:
            state = topics.get(record.topic)
            if state is None or state.created_index > store_index:
                return f"topic {record.topic!r} was deleted after the store at {store_index}"
        at += count
    by_topic, ttls = group_by_topic(records)
    return CommitPlan(by_topic, [ttl_ms for _, _, ttl_ms, _ in ttls])


class CommitRecords(Sequence[Record]):
    """The records a commit made visible, as one sequence (position ``k`` = record ``k`` of
    the transaction), decoding a store entry only when one of its records is asked for: a
    page of a large transaction costs the stores it touches, not the whole transaction."""

    def __init__(
        self, stores: Sequence[tuple[int, int]], read_store: Callable[[int], TxStore | None]
    ) -> None:
        self._stores = [index for index, _ in stores]
        self._ends: list[int] = []
        total = 0
        for _, count in stores:
            total += count
            self._ends.append(total)
        self._read_store = read_store
        self._loaded: dict[int, tuple[Record, ...]] = {}

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def __getitem__(self, position: Any) -> Any:
        if not isinstance(position, int):
            return [self[k] for k in range(len(self))[position]]
        if not 0 <= position < len(self):
            raise IndexError(position)
        which = bisect.bisect_right(self._ends, position)
        records = self._loaded.get(which)
        if records is None:
            entry = self._read_store(self._stores[which])
            if entry is None:  # only if the log lost it: answered as an error, never guessed
                raise TopicError(
                    "Unavailable", f"transaction store {self._stores[which]} is not readable"
                )
            records = self._loaded[which] = entry.records
        start = self._ends[which - 1] if which else 0
        return records[position - start]
