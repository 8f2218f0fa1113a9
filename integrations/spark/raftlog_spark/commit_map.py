"""Transaction commits resolved in bulk (issue #31): a task's commits from one planning answer.

Why: resolving a commit by ``TR`` reads (:class:`raftlog_spark.commits.CommitReader`) costs a
leader round trip per commit and topic -- on a log with many commits, more than all its plain
records. The planner's ``TC`` request asks for the read range's commits with their stores
(``commits: true``, :mod:`raftlog.topics.wire_counts`), and ships each partition the commits
in its ranges (:class:`CommitMap`). A task then reads the store entries those commits name
straight from the log -- runs of nearby stores in one ``RequestEntries`` stream, from the
partition's peer like its own entries -- and builds every commit's records locally: record
``k`` of the transaction (store order, across topics) is ``(commit index, k)``, admitted by
the read's topic filter and pinned :class:`TopicView` like any record. The map is the topic
index's own, so a commit the state machine aborted (it never indexed one) gives no rows.

A commit outside the answered span (before the leader's first index, past ``commits_to``),
and one whose stores have left the log (compacted: the peers keep copies in their index
only), falls back to the ``TR`` reads of ``CommitReader``. Peers without ``commits`` (older
raftlog) answer no map: every commit falls back.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from raftlog.client import IndexedEntry
from raftlog.entry import EntryType
from raftlog.topics.client_view import TopicView
from raftlog.topics.records import LoggedRecord, Record, RecordFormatError, RecordId
from raftlog.topics.records_tx import TxStore, decode_any_entry
from raftlog.topics.wire_counts import CommitStores, CountsResult
from raftlog_spark.logclient import LogClient

RUN_GAP: Final = 64
"""Store entries at most this many indexes apart are read in one stream (the entries in
between are cheaper to skip than a round trip)."""


@dataclass(frozen=True, slots=True)
class CommitMap:
    """The commits of a read (or of one partition) with their stores, and the index span
    the map is complete over (a commit there that is not in the map made nothing visible).
    Plain ints and tuples: pickled into every partition."""

    commits: CommitStores
    lo: int
    hi: int

    @classmethod
    def of(cls, counts: CountsResult | None, lo: int, hi: int) -> CommitMap | None:
        """The map of a ``TC`` answer for ``[lo, hi]`` (None: the peer sent none)."""
        if counts is None or counts.commits is None:
            return None
        return cls(counts.commits, max(lo, counts.first_index), min(hi, counts.commits_to))

    def within(self, ranges: Sequence[tuple[int, int]]) -> CommitMap:
        """The part of the map a partition of ``ranges`` needs."""
        keys = [index for index, _ in self.commits]
        picked: list[tuple[int, tuple[tuple[int, int], ...]]] = []
        for lo, hi in ranges:
            first, last = bisect.bisect_left(keys, lo), bisect.bisect_right(keys, hi)
            picked.extend(self.commits[first:last])
        return CommitMap(tuple(picked), self.lo, self.hi)

    def covers(self, index: int) -> bool:
        return self.lo <= index <= self.hi


def store_runs(indexes: Sequence[int], gap: int = RUN_GAP) -> list[tuple[int, int]]:
    """Sorted distinct ``indexes`` as inclusive runs, neighbours ``gap`` or less apart joined."""
    runs: list[tuple[int, int]] = []
    for index in sorted(set(indexes)):
        if runs and index - runs[-1][1] <= gap:
            runs[-1] = (runs[-1][0], index)
        else:
            runs.append((index, index))
    return runs


class BulkCommits:
    """``records(commit index, commit append time)``: the admitted records of a commit, from
    the stores the partition's :class:`CommitMap` names (loaded on the first commit met),
    else from ``fallback`` (``TR`` reads)."""

    def __init__(
        self,
        client: LogClient,
        view: TopicView,
        wanted: Callable[[str], bool] | None,
        commit_map: CommitMap,
        fallback: Callable[[int], Sequence[LoggedRecord]],
        *,
        peer: str | None = None,
    ) -> None:
        self._client = client
        self._view = view
        self._wanted = wanted
        self._map = dict(commit_map.commits)
        self._span = commit_map
        self._fallback = fallback
        self._peer = peer
        self._stores: dict[int, TxStore] | None = None
        self.fallbacks = 0
        """Commits resolved by ``TR`` reads (tests and diagnostics)."""

    def records(self, index: int, stamp: int = 0) -> list[LoggedRecord]:
        stores = self._map.get(index)
        if stores is None:
            if self._span.covers(index):
                return []  # the state machine indexed no commit there (aborted)
            return self._resolve_elsewhere(index)
        if self._stores is None:
            self._stores = self._load()
        found: list[Record] = []
        for store_index, count in stores:
            store = self._stores.get(store_index)
            if store is None or len(store.records) != count:
                return self._resolve_elsewhere(index)  # compacted out of the log
            found.extend(store.records)
        wanted, view = self._wanted, self._view
        return [
            LoggedRecord(RecordId(index, k), stamp, record)
            for k, record in enumerate(found)
            if (wanted is None or wanted(record.topic)) and view.admits(index, k, stamp, record)
        ]

    def _resolve_elsewhere(self, index: int) -> list[LoggedRecord]:
        self.fallbacks += 1
        return list(self._fallback(index))

    def _load(self) -> dict[int, TxStore]:
        """Every store entry the map names, read in runs (compacted ones are left out)."""
        needed = {s for stores in self._map.values() for s, _ in stores}
        out: dict[int, TxStore] = {}
        for lo, hi in store_runs(sorted(needed)):
            for chunk in self._client.stream_range(
                lo, hi, fail_on_data_loss=False, from_peer=self._peer
            ):
                for item in chunk:
                    if item.index not in needed or not isinstance(item, IndexedEntry):
                        continue
                    if item.entry.entry_type != EntryType.STATE:
                        continue
                    try:
                        entry = decode_any_entry(item.entry.data)
                    except RecordFormatError:
                        continue
                    if isinstance(entry, TxStore):
                        out[item.index] = entry
        return out
