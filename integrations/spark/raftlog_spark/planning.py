"""Planning: the committed index range of a read and its split into partitions.

A batch read covers ``[first, last]``: by default the first index still in the log and the
leader's last applied (= committed and servable) index, both taken once when the DataFrame
is created; ``startingIndex`` / ``endingIndex`` (inclusive) and ``startingTimestamp`` /
``endingTimestamp`` narrow it, and so do pushed filters. The result is a list of disjoint
index ranges; :func:`split` cuts them into partitions of contiguous ranges.

Times map to indexes by binary search over the append times the leader stamps into topic
entries (:func:`first_stamped_at`). Stamps are non-decreasing in log order while the
leaders' clocks agree (each leader never stamps earlier than its previous stamp); the search
assumes it. Raw entries carry no time: a time range ``[start, end)`` covers the entries from
the first one stamped at or after ``start`` up to, not including, the first one stamped at
or after ``end``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from pyspark.sql.datasource import InputPartition

from raftlog.client import IndexedEntry
from raftlog.entry import EntryType
from raftlog.topics.client_view import TopicView
from raftlog.topics.records import HEADER_SIZE, is_topic_data
from raftlog.topics.stamp import append_time_of
from raftlog_spark.balance import Segment, balanced_cuts
from raftlog_spark.commit_map import CommitMap
from raftlog_spark.errors import RaftlogDataLossError, RaftlogSourceError
from raftlog_spark.filters import MAX_INDEX, IndexRanges, ScanSpec, intersect, size
from raftlog_spark.logclient import LogClient
from raftlog_spark.options import DEFAULT_RECORDS_PER_PARTITION, SourceOptions

PROBE_CHUNK: Final = 256


@dataclass(frozen=True, slots=True)
class LogPosition:
    """What the leader reported when the read was pinned (plain ints: pickled with the source)."""

    first_index: int
    last_index: int
    """The last committed *and applied* index: RequestEntries serves up to there."""
    term: int

    @classmethod
    def of(cls, info: Any) -> LogPosition:
        return cls(info.first_index, min(info.commit_index, info.last_applied), info.term)

    def available(self) -> str:
        """What can be read, for error messages: a non-empty range, or why there is none."""
        if self.first_index <= self.last_index:
            return f"available: {self.first_index}..{self.last_index}"
        return (
            f"no entry is available now (everything up to {self.last_index} was compacted); "
            f"the next one will be {self.last_index + 1}"
        )


class IndexRangePartition(InputPartition):
    """One task's share: disjoint inclusive index ranges, read in order, the peer to read
    them from, and what every task of the read shares, fetched once at planning: the topic
    read rules (``view``) and the transaction commits in its ranges (``commits``)."""

    def __init__(
        self,
        number: int,
        ranges: Sequence[tuple[int, int]],
        view: TopicView | None = None,
        peer: str | None = None,
        commits: CommitMap | None = None,
    ) -> None:
        super().__init__(number)
        self.number = number
        self.ranges = tuple((int(lo), int(hi)) for lo, hi in ranges)
        self.view = view
        self.peer = peer
        self.commits = commits
        """The commits of the ranges with their stores (None: resolved by ``TR`` reads)."""
        """The peer this task reads from first (planned round-robin over the cluster)."""

    @property
    def entries(self) -> int:
        return size(self.ranges)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IndexRangePartition) and other.ranges == self.ranges

    def __hash__(self) -> int:
        return hash(self.ranges)


def split(
    ranges: IndexRanges,
    *,
    num_partitions: int | None = None,
    entries_per_partition: int | None = None,
    records_per_partition: int | None = None,
    segments: Sequence[Segment] | None = None,
    view: TopicView | None = None,
    peers: Sequence[str] = (),
    commits: CommitMap | None = None,
    min_partitions: int | None = None,
) -> list[IndexRangePartition]:
    """Cut ``ranges`` into partitions of nearly equal weight, in log order, none empty.

    ``segments`` weigh the ranges (:func:`raftlog_spark.balance.weigh`: rows per index
    range); without them every entry weighs the same. The count: ``num_partitions``, else
    ``entries_per_partition`` entries, else ``records_per_partition`` (default
    ``DEFAULT_RECORDS_PER_PARTITION``) of weight per partition, at least ``min_partitions``.
    Every partition carries
    ``view`` and its share of ``commits``; partition ``n`` reads from ``peers[n % len(peers)]``
    first (round-robin)."""
    total = size(ranges)
    if total == 0:
        return []
    if segments is None:
        segments = [Segment(lo, hi, float(hi - lo + 1)) for lo, hi in ranges]
    if num_partitions is not None:
        count = num_partitions
    elif entries_per_partition is not None:
        count = -(-total // entries_per_partition)
    else:
        per = records_per_partition or DEFAULT_RECORDS_PER_PARTITION
        count = max(1, math.ceil(sum(s.weight for s in segments) / per), min_partitions or 1)
    quotas = balanced_cuts(segments, min(count, total))
    parts: list[IndexRangePartition] = []
    pending = list(ranges)
    for number, quota in enumerate(quotas):
        taken: list[tuple[int, int]] = []
        left = quota
        while left:
            lo, hi = pending[0]
            step = min(left, hi - lo + 1)
            taken.append((lo, lo + step - 1))
            left -= step
            if lo + step > hi:
                pending.pop(0)
            else:
                pending[0] = (lo + step, hi)
        peer = peers[number % len(peers)] if peers else None
        mine = None if commits is None else commits.within(taken)
        parts.append(IndexRangePartition(number, taken, view, peer, mine))
    return parts


class StampIndex:
    """Append-time lookups over the committed log ``[lo, hi]`` (read-through, memoised)."""

    def __init__(self, client: LogClient, lo: int, hi: int) -> None:
        self._client = client
        self.lo = lo
        self.hi = hi
        self._known: list[tuple[int, int, int | None]] = []
        """(from, to, stamp): the first stamped entry at or after any index in [from, to]
        is ``to`` with ``stamp`` (None: no stamped entry up to ``hi``; then ``to`` = hi)."""
        self.probes = 0

    def first_stamped_at(self, index: int) -> tuple[int, int] | None:
        """(index, append time ms) of the first stamped topic entry at or after ``index``."""
        for start, end, stamp in self._known:
            if start <= index <= end:
                return None if stamp is None else (end, stamp)
        self.probes += 1
        for chunk in self._client.chunks(index - 1, self.hi - index + 1, chunk_entries=PROBE_CHUNK):
            for item in chunk:
                if not isinstance(item, IndexedEntry):
                    continue  # the log was compacted under us: the search still converges
                entry = item.entry
                if entry.entry_type == EntryType.STATE and len(entry.data) > HEADER_SIZE:
                    data = entry.data
                    stamp = append_time_of(data) if is_topic_data(data) else 0
                    if stamp:
                        self._known.append((index, item.index, stamp))
                        return item.index, stamp
        self._known.append((index, self.hi, None))
        return None

    def first_index_at_or_after(self, ms: int) -> int:
        """The first stamped entry with append time >= ``ms`` (``hi + 1`` if none)."""
        a, b = self.lo, self.hi + 1
        while a < b:
            mid = (a + b) // 2
            found = self.first_stamped_at(mid)
            if found is None or found[1] >= ms:
                b = mid
            else:
                a = found[0] + 1
        found = self.first_stamped_at(a) if a <= self.hi else None
        return self.hi + 1 if found is None else found[0]


def time_ranges(
    client: LogClient, lo: int, hi: int, start_ms: int | None, end_ms: int | None
) -> IndexRanges:
    """The index range of entries appended in ``[start_ms, end_ms)`` within ``[lo, hi]``."""
    if lo > hi or (start_ms is None and end_ms is None):
        return ((lo, hi),) if lo <= hi else ()
    stamps = StampIndex(client, lo, hi)
    first = lo if start_ms is None else stamps.first_index_at_or_after(start_ms)
    last = hi if end_ms is None else stamps.first_index_at_or_after(end_ms) - 1
    return ((first, last),) if first <= last else ()


def check_start(name: str, index: int, pos: LogPosition, fail_on_data_loss: bool) -> int:
    """``index`` as the first index of a read, or a clear error."""
    if index > pos.last_index:
        raise RaftlogSourceError(
            f"raftlog source: {name} {index} is beyond the commit index {pos.last_index} "
            f"(first available index {pos.first_index}, term {pos.term})"
        )
    if index < pos.first_index:
        if fail_on_data_loss:
            raise RaftlogDataLossError(
                f"raftlog source: {name} {index} is below the first available index "
                f"{pos.first_index} (earlier entries were compacted into a snapshot); "
                f"{pos.available()}; use an index there, or failOnDataLoss=false to start at "
                "the first available one"
            )
        return pos.first_index
    return index


def batch_ranges(opts: SourceOptions, pos: LogPosition) -> tuple[int, int]:
    """``[lo, hi]`` from the index options, checked against the pinned log position
    (``lo > hi`` for an empty read)."""
    lo, hi = pos.first_index, pos.last_index
    if opts.group_start is not None:  # groupId: the group's position, pinned at load()
        if opts.group_start > pos.last_index:
            return opts.group_start, pos.last_index  # everything consumed: an empty read
        lo = check_start("groupId's position", opts.group_start, pos, opts.fail_on_data_loss)
    elif opts.starting_index is not None:
        lo = check_start("startingIndex", opts.starting_index, pos, opts.fail_on_data_loss)
    if opts.ending_index is not None:
        if opts.ending_index > pos.last_index:
            raise RaftlogSourceError(
                f"raftlog source: endingIndex {opts.ending_index} is beyond the commit index "
                f"{pos.last_index}"
            )
        if opts.ending_index < pos.first_index and opts.fail_on_data_loss:
            raise RaftlogDataLossError(
                f"raftlog source: endingIndex {opts.ending_index} is below the first available "
                f"index {pos.first_index} (compacted); {pos.available()}"
            )
        hi = opts.ending_index
    return lo, hi


def plan_batch(
    opts: SourceOptions, pos: LogPosition, spec: ScanSpec, client: LogClient | None
) -> IndexRanges:
    """Every index range a batch read must stream, all options and pushed filters applied.

    ``client`` is needed only when times must be mapped to indexes."""
    lo, hi = batch_ranges(opts, pos)
    ranges = intersect(((lo, hi),), spec.index_ranges) if lo <= hi else ()
    if not ranges or spec.reads_nothing:
        return ()
    start_ms = opts.starting_timestamp_ms if opts.group_start is None else None
    starts = [t for t in (start_ms, spec.time.ms_window()[0]) if t is not None]
    ends = [t for t in (opts.ending_timestamp_ms, spec.time.ms_window()[1]) if t is not None]
    if starts or ends:
        if client is None:
            raise AssertionError("a client is needed to map times to indexes")
        span = time_ranges(
            client,
            ranges[0][0],
            ranges[-1][1],
            max(starts) if starts else None,
            min(ends) if ends else None,
        )
        ranges = intersect(ranges, span)
    return ranges


def stream_ranges(start: int, end: int) -> IndexRanges:
    """Entries of a micro-batch between offsets (exclusive start, inclusive end)."""
    return ((start + 1, end),) if end > start else ()


__all__ = [
    "MAX_INDEX",
    "IndexRangePartition",
    "LogPosition",
    "StampIndex",
    "batch_ranges",
    "check_start",
    "plan_batch",
    "split",
    "stream_ranges",
    "time_ranges",
]
