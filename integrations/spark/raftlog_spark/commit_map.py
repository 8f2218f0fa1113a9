"""Transaction commits resolved in bulk (issue #31): a task's commits from one planning answer.

Why: resolving a commit by ``TR`` reads (:class:`raftlog_spark.commits.CommitReader`) costs a
leader round trip per commit and topic -- on a log with many commits, more than all its plain
records. The planner's ``TC`` request asks for the read range's commits with their stores
(``commits: true``, :mod:`raftlog.topics.wire_counts`), and ships each partition the commits
in its ranges (:class:`CommitMap`). A task keeps the store entries those commits name as
its own stream passes them (a store precedes its commit), reads only the ones outside its
ranges straight from the log -- runs of nearby stores in one ``RequestEntries`` stream, from
the partition's peer like its own entries -- and builds every commit's rows locally, as
columns (:class:`raftlog_spark.columns.CommitRows`, no object per record): record ``k`` of
the transaction (store order, across topics) is ``(commit index, k)``, admitted by the
read's topic filter and pinned :class:`TopicView` like any record. The map is the topic
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
from itertools import chain
from typing import Final, cast

from raftlog.client import IndexedEntry
from raftlog.entry import EntryType
from raftlog.topics.client_view import TopicView
from raftlog.topics.records import HEADER_SIZE, LoggedRecord, Record, RecordFormatError
from raftlog.topics.records_tx import KIND_TX_STORE, TxStore, decode_any_entry
from raftlog.topics.wire_counts import CommitStores, CountsResult
from raftlog_spark.columns import KIND_OFFSET, Columns, CommitRows, columns_of, store_columns
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


EMPTY: Final = CommitRows(((), (), (), (), ()), (), 0)
"""A commit that made nothing visible."""


class BulkCommits:
    """``records(commit index, commit append time)``: the admitted rows of a commit
    (:class:`CommitRows`), built from the stores the partition's :class:`CommitMap` names,
    else from ``fallback`` (``TR`` reads).

    A store inside the partition's own ``ranges`` precedes its commit there, so the task's
    stream has passed it before the commit: the row builder hands such entries to
    :meth:`keep` and no entry is read twice. Only stores outside the ranges (another
    task's, or before the read) are streamed separately, all at once on the first commit
    that needs one (a few runs of :func:`store_runs`, from the partition's peer)."""

    def __init__(
        self,
        client: LogClient,
        view: TopicView,
        wanted: Callable[[str], bool] | None,
        commit_map: CommitMap,
        fallback: Callable[[int], Sequence[LoggedRecord]],
        *,
        peer: str | None = None,
        ranges: Sequence[tuple[int, int]] = (),
    ) -> None:
        self._client = client
        self._view = view
        self._wanted = wanted
        self._map = dict(commit_map.commits)
        self._span = commit_map
        self._fallback = fallback
        self._peer = peer
        self._needed = {s for stores in self._map.values() for s, _ in stores}
        self._outside = sorted(s for s in self._needed if not _within(s, ranges))
        self._kept: dict[int, bytes] = {}
        """Store entries passed by (or loaded), until their commit takes them."""
        self.fallbacks = 0
        """Commits resolved by ``TR`` reads (tests and diagnostics)."""

    def keep(self, index: int, data: bytes) -> None:
        """The task's stream passed store entry ``index``: kept if a commit of the map
        names it."""
        if index in self._needed:
            self._kept[index] = data

    def records(self, index: int, stamp: int = 0) -> CommitRows | list[LoggedRecord]:
        stores = self._map.get(index)
        if stores is None:
            if self._span.covers(index):
                return EMPTY  # the state machine indexed no commit there (aborted)
            return self._resolve_elsewhere(index)
        missing = [s for s, _ in stores if s not in self._kept]
        if missing:
            self._load(missing)
        parts: list[StoreRecords] = []
        for store_index, count in stores:
            data = self._kept.pop(store_index, None)
            part = None if data is None else _store_records(data)
            if part is None or len(part[0][0]) != count:
                return self._resolve_elsewhere(index)  # compacted out of the log
            parts.append(part)
        return self._admitted(index, stamp, parts)

    def _admitted(self, index: int, stamp: int, parts: list[StoreRecords]) -> CommitRows:
        """The rows of records ``k`` = 0.. of ``parts`` (store order) the read admits: by
        topic once per distinct topic for plain records, record by record (TTLs) else."""
        wanted, view = self._wanted, self._view
        columns = _joined([columns for columns, _ in parts])
        if all(records is None for _, records in parts):
            first: dict[str, int | None] = {}
            for topic in set(columns[0]):
                ok = wanted is None or wanted(topic)
                first[topic] = view.first_admitted(topic, index) if ok else None
            if all(f == 0 for f in first.values()):
                return CommitRows(columns, range(len(columns[0])), stamp)
            picked = [k for k, t in enumerate(columns[0]) if (f := first[t]) is not None and k >= f]
            return CommitRows.pick(columns, picked, stamp)
        records = [
            r for cols, recs in parts for r in (recs if recs is not None else _as_records(cols))
        ]
        picked = [
            k
            for k, r in enumerate(records)
            if (wanted is None or wanted(r.topic)) and view.admits(index, k, stamp, r)
        ]
        return CommitRows.pick(columns, picked, stamp)

    def _resolve_elsewhere(self, index: int) -> list[LoggedRecord]:
        self.fallbacks += 1
        return list(self._fallback(index))

    def _load(self, missing: Sequence[int]) -> None:
        """Store entries ``missing`` (and, the first time, every one outside the task's
        ranges), read in runs; compacted ones stay missing."""
        wanted = set(missing) | set(self._outside)
        self._outside = []
        for lo, hi in store_runs(sorted(wanted)):
            for chunk in self._client.stream_range(
                lo, hi, fail_on_data_loss=False, from_peer=self._peer
            ):
                for item in chunk:
                    if (
                        item.index in wanted
                        and isinstance(item, IndexedEntry)
                        and item.entry.entry_type == EntryType.STATE
                    ):
                        self._kept[item.index] = item.entry.data


def _within(index: int, ranges: Sequence[tuple[int, int]]) -> bool:
    return any(lo <= index <= hi for lo, hi in ranges)


StoreRecords = tuple[Columns, tuple[Record, ...] | None]
"""A store's records as columns, and as ``Record`` objects when some are not plain (a TTL,
a tombstone: checked one by one)."""


def _store_records(data: bytes) -> StoreRecords | None:
    """A store's records (None when ``data`` is no well-formed store)."""
    if len(data) <= HEADER_SIZE or data[KIND_OFFSET] != KIND_TX_STORE:
        return None
    columns = store_columns(data)
    if columns is not None:
        return columns, None
    try:
        entry = decode_any_entry(data)
    except RecordFormatError:
        return None
    if not isinstance(entry, TxStore):
        return None
    return columns_of(entry.records), entry.records


def _joined(parts: list[Columns]) -> Columns:
    if len(parts) == 1:
        return parts[0]
    return cast(Columns, tuple(tuple(chain.from_iterable(p[c] for p in parts)) for c in range(5)))


def _as_records(columns: Columns) -> tuple[Record, ...]:
    return tuple(Record(t, v, k, h, s) for t, k, v, h, s in zip(*columns, strict=True))
