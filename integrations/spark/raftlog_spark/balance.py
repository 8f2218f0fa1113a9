"""Balancing: what each index range weighs, and cuts into partitions of equal weight.

A ``publish_batch`` entry may hold 500 records and a plain entry one, so equal entry counts
can mean a 100x difference in rows (issue #17: 97% of the rows in one of four partitions).
The peers know every entry's record count from their topic index; one ``TC`` request
(``raftlog.topics.wire_counts``) returns them per bucket of ``step`` entries, without reading
any entry. A segment's weight is the rows it gives (records of the wanted topics, plus
one per other entry when raw entries are rows) and a negligible per-entry rest
(``ENTRY_COST``). Inside a bucket entries are taken as equally heavy,
so a cut is accurate to a fraction of one bucket (``MAX_BUCKETS`` buckets over the range).

Peers without ``TC`` (the reference, older raftlog) leave every entry weighing 1: the old
split by entries.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from raftlog.topics.wire_counts import CountsResult
from raftlog_spark.filters import IndexRanges

MAX_BUCKETS: Final = 8192
ENTRY_COST: Final = 0.01
"""Weight of an entry on top of its rows: partitions are planned by rows -- records of the
selected topics (plus raw rows when they are rows) -- not by entries (issue #31: a weight of
8 rows per entry, meant to even out decoding time, put 1,314 rows in a partition of
single-record entries and 11,500 in one of 500-record batches, and counted the entries of
other topics against a topic filter). The small rest only orders stretches without rows."""


@dataclass(frozen=True, slots=True)
class Segment:
    lo: int
    hi: int
    weight: float
    """Total weight of the entries lo..hi (spread evenly over them)."""

    @property
    def entries(self) -> int:
        return self.hi - self.lo + 1


def bucket_step(lo: int, hi: int, max_buckets: int = MAX_BUCKETS) -> int:
    """Entries per bucket so that ``[lo, hi]`` needs at most ``max_buckets`` buckets."""
    return max(1, -(-(hi - lo + 1) // max_buckets))


def weigh(
    ranges: IndexRanges,
    counts: CountsResult | None,
    origin: int,
    step: int,
    *,
    raw_rows: bool,
    entry_cost: float = ENTRY_COST,
) -> list[Segment]:
    """``ranges`` as segments weighted by ``counts`` (buckets of ``step`` entries from index
    ``origin``): rows plus ``entry_cost`` per entry (0: rows alone, for row limits);
    uniform weights (1 per entry) without counts."""
    if counts is None:
        return [Segment(lo, hi, float(hi - lo + 1)) for lo, hi in ranges]
    out: list[Segment] = []
    for lo, hi in ranges:
        index = lo
        while index <= hi:
            bucket = (index - origin) // step
            start = origin + bucket * step
            end = min(hi, start + step - 1)
            size = step
            if bucket >= len(counts.records):
                out.append(Segment(index, hi, float(hi - index + 1)))
                break
            record_entries = counts.record_entries[bucket]
            others = max(0, size - record_entries)
            full = counts.records[bucket] + (others if raw_rows else 0) + entry_cost * size
            share = (end - index + 1) / size
            out.append(Segment(index, end, full * share))
            index = end + 1
    return out


def at_stores(counts: CountsResult, origin: int, step: int) -> CountsResult:
    """``counts`` as ``isolation.level=read_uncommitted`` reads them: each committed
    transaction's records moved from its commit's bucket (where ``TC`` counts them, and
    where a read-committed read returns them) to the buckets of its stores (where a
    read-uncommitted read returns them; stores before ``origin`` are not read). Needs the
    answer's commit map; without one the counts stay as they are. With a topic filter a
    commit's bucket counts only the selected topics' records, the map its stores' whole
    size: the stores get that share. Stores of transactions that were rolled back or are
    still open are in no map and keep weighing as entries only."""
    if not counts.commits:
        return counts
    records = list(counts.records)
    last = len(records) - 1
    for commit, stores in counts.commits:
        at = (commit - origin) // step
        total = sum(n for _, n in stores)
        if not 0 <= at <= last or not total:
            continue
        moved = min(total, records[at])
        records[at] -= moved
        for store, n in stores:
            bucket = (store - origin) // step
            if 0 <= bucket <= last:
                records[bucket] += round(n * moved / total)
    return dataclasses.replace(counts, records=tuple(records))


def rows_upto(segments: Sequence[Segment], budget: float, *, at_least_one: bool = True) -> int:
    """The last index of the longest prefix of ``segments`` weighing at most ``budget``
    (``at_least_one``: at least the first entry, so a stream always moves; otherwise the
    index before the first segment when even its first entry does not fit)."""
    total = 0.0
    last = segments[0].lo - (0 if at_least_one else 1) if segments else 0
    for seg in segments:
        per = seg.weight / seg.entries
        if total + seg.weight <= budget:
            total += seg.weight
            last = seg.hi
            continue
        fits = int((budget - total) // per) if per > 0 else seg.entries
        return max(last, seg.lo + fits - 1) if fits > 0 else last
    return last


def balanced_cuts(segments: Sequence[Segment], count: int) -> list[int]:
    """Entries per partition (``count`` partitions, none empty, in order) so that the
    partitions' weights are as equal as entry boundaries allow."""
    entries = sum(s.entries for s in segments)
    count = max(1, min(count, entries))
    starts: list[float] = []  # cumulative weight before each segment
    before: list[int] = []  # cumulative entries before each segment
    weight = 0.0
    seen = 0
    for seg in segments:
        starts.append(weight)
        before.append(seen)
        weight += seg.weight
        seen += seg.entries
    cuts: list[int] = []  # entries in partitions 0..k
    for k in range(1, count):
        target = weight * k / count
        at = max(0, bisect.bisect_right(starts, target) - 1)
        seg = segments[at]
        per = seg.weight / seg.entries
        inside = round((target - starts[at]) / per) if per > 0 else 0
        cut = before[at] + min(seg.entries, max(0, inside))
        low = (cuts[-1] if cuts else 0) + 1
        high = entries - (count - k)
        cuts.append(min(max(cut, low), high))
    bounds = [0, *cuts, entries]
    return [bounds[n + 1] - bounds[n] for n in range(count)]
