"""Filter pushdown: Spark's pushed filters (PySpark >= 4.1) as a :class:`ScanSpec`.

* ``index``: =, <=>, <, <=, >, >=, IN become index ranges: only those entries are read
  (partitions are planned over them), so these filters are exact without a row check.
* ``topic``: =, <=>, IN, IS [NOT] NULL, LIKE 'x%' / '%x' / '%x%' and NOT of these are
  evaluated on each record with SQL's three-valued logic; entries that cannot hold a
  wanted topic are skipped before they are decoded. The ``topics`` option adds to them.
* ``timestamp``: =, <=>, <, <=, >, >=, IS [NOT] NULL are checked exactly on each row
  (the append time sits in the entry header, so rejected entries are not decoded), and
  narrow the planned index range by binary search over the append times (see
  :mod:`raftlog_spark.planning`).

Anything else (other columns, OR, NOT of index/time comparisons) is returned to Spark.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Final, TypeAlias

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

MAX_INDEX: Final = (1 << 63) - 1
EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
ALL_INDEXES: Final = ((0, MAX_INDEX),)

IndexRanges: TypeAlias = tuple[tuple[int, int], ...]
"""Sorted, disjoint, inclusive (lo, hi) ranges of log indexes."""
TopicTerm: TypeAlias = tuple[Any, ...]
"""("eq", v, null_safe) | ("in", frozenset, has_null) | ("null",) | ("notnull",) |
("prefix", s) | ("suffix", s) | ("contains", s) | ("not", term)."""


def intersect(a: IndexRanges, b: IndexRanges) -> IndexRanges:
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def from_points(points: Iterable[int]) -> IndexRanges:
    """Ranges covering exactly ``points`` (runs of consecutive indexes merged)."""
    out: list[tuple[int, int]] = []
    for p in sorted(set(points)):
        if out and out[-1][1] + 1 == p:
            out[-1] = (out[-1][0], p)
        else:
            out.append((p, p))
    return tuple(out)


def size(ranges: IndexRanges) -> int:
    return sum(hi - lo + 1 for lo, hi in ranges)


def to_micros(value: object) -> int | None:
    """Microseconds since the epoch of a pushed timestamp literal (naive = UTC)."""
    if not isinstance(value, dt.datetime):
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return (value - EPOCH) // dt.timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class TimeBounds:
    """Conjunction of pushed conditions on ``timestamp`` (microseconds since the epoch)."""

    lo: int | None = None
    lo_inclusive: bool = True
    hi: int | None = None
    hi_inclusive: bool = True
    null: bool | None = None
    """True: only rows without a timestamp; False: only rows with one; None: either."""

    @property
    def constrained(self) -> bool:
        return self.lo is not None or self.hi is not None or self.null is not None

    @property
    def admits_null(self) -> bool:
        return self.lo is None and self.hi is None and self.null is not False

    def admits(self, micros: int | None) -> bool:
        if micros is None:
            return self.admits_null
        if self.null is True:
            return False
        if self.lo is not None and (
            micros < self.lo or (micros == self.lo and not self.lo_inclusive)
        ):
            return False
        return not (
            self.hi is not None
            and (micros > self.hi or (micros == self.hi and not self.hi_inclusive))
        )

    def with_lower(self, micros: int, inclusive: bool) -> TimeBounds:
        if self.lo is None or micros > self.lo or (micros == self.lo and not inclusive):
            return replace(self, lo=micros, lo_inclusive=inclusive)
        return self

    def with_upper(self, micros: int, inclusive: bool) -> TimeBounds:
        if self.hi is None or micros < self.hi or (micros == self.hi and not inclusive):
            return replace(self, hi=micros, hi_inclusive=inclusive)
        return self

    def with_null(self, null: bool) -> TimeBounds:
        if self.null is None or self.null == null:
            return replace(self, null=null)
        return replace(self, lo=1, hi=0)  # IS NULL AND IS NOT NULL: nothing

    def ms_window(self) -> tuple[int | None, int | None]:
        """``[start, end)`` in whole milliseconds holding every admitted append time
        (append times are milliseconds): bounds for the index range search."""
        start = end = None
        if self.lo is not None:
            start = -(-self.lo // 1000) if self.lo_inclusive else self.lo // 1000 + 1
        if self.hi is not None:
            end = -(-self.hi // 1000) if not self.hi_inclusive else self.hi // 1000 + 1
        return start, end


def eval_topic(term: TopicTerm, topic: str | None) -> bool | None:
    """SQL three-valued result of one topic condition."""
    kind = term[0]
    if kind == "null":
        return topic is None
    if kind == "notnull":
        return topic is not None
    if kind == "not":
        inner = eval_topic(term[1], topic)
        return None if inner is None else not inner
    if kind == "eq":
        if topic is None:
            return False if term[2] else None
        return bool(topic == term[1])
    if topic is None:
        return None
    if kind == "in":
        return True if topic in term[1] else (None if term[2] else False)
    text = str(term[1])
    if kind == "prefix":
        return topic.startswith(text)
    if kind == "suffix":
        return topic.endswith(text)
    if kind == "contains":
        return text in topic
    raise AssertionError(f"unknown topic term {term!r}")


def _topic_term(f: Filter) -> TopicTerm | None:
    if isinstance(f, Not):
        inner = _topic_term(f.child)
        return None if inner is None else ("not", inner)
    if getattr(f, "attribute", None) != ("topic",):
        return None
    value = getattr(f, "value", None)
    if isinstance(f, IsNull):
        return ("null",)
    if isinstance(f, IsNotNull):
        return ("notnull",)
    if isinstance(f, EqualNullSafe):
        return (
            ("null",) if value is None else ("eq", value, True) if isinstance(value, str) else None
        )
    if isinstance(f, EqualTo) and isinstance(value, str):
        return ("eq", value, False)
    if isinstance(f, In) and isinstance(value, list | tuple):
        names = [v for v in value if v is not None]
        if all(isinstance(v, str) for v in names):
            return ("in", frozenset(names), len(names) != len(value))
        return None
    if isinstance(f, StringStartsWith) and isinstance(value, str):
        return ("prefix", value)
    if isinstance(f, StringEndsWith) and isinstance(value, str):
        return ("suffix", value)
    if isinstance(f, StringContains) and isinstance(value, str):
        return ("contains", value)
    return None


def _int_value(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class ScanSpec:
    """What a scan reads: index ranges, and the row conditions its tasks apply."""

    index_ranges: IndexRanges = ALL_INDEXES
    time: TimeBounds = field(default_factory=TimeBounds)
    topic_terms: tuple[TopicTerm, ...] = ()
    topics: frozenset[str] | None = None
    """The ``topics`` option: only records of these topics."""
    topic_pattern: str | None = None
    """The ``topicPattern`` option: only records of topics whose name matches it whole."""

    def admits_topic(self, topic: str | None) -> bool:
        if self.topics is not None and topic not in self.topics:
            return False
        if self.topic_pattern is not None and (
            topic is None or re.fullmatch(self.topic_pattern, topic) is None
        ):
            return False
        return all(eval_topic(term, topic) is True for term in self.topic_terms)

    def topic_checker(self) -> Callable[[str], bool] | None:
        """A cached per-topic check, or None when every topic is admitted."""
        if self.topics is None and self.topic_pattern is None and not self.topic_terms:
            return None
        cache: dict[str, bool] = {}

        def check(topic: str) -> bool:
            ok = cache.get(topic)
            if ok is None:
                ok = cache[topic] = self.admits_topic(topic)
            return ok

        return check

    def wanted_topics(self) -> frozenset[str] | None:
        """A finite set holding every admitted topic, if the conditions imply one."""
        wanted = self.topics
        for term in self.topic_terms:
            if term[0] == "eq":
                names = frozenset((term[1],))
            elif term[0] == "in":
                names = term[1]
            else:
                continue
            wanted = names if wanted is None else wanted & names
        return None if wanted is None else frozenset(t for t in wanted if self.admits_topic(t))

    @property
    def admits_raw(self) -> bool:
        """Whether raw (non-topic) STATE entries can give rows."""
        return self.admits_topic(None) and self.time.admits(None)

    @property
    def reads_nothing(self) -> bool:
        return (
            not self.index_ranges
            or (not self.admits_raw and self.wanted_topics() == frozenset())
            or (
                self.time.lo is not None
                and self.time.hi is not None
                and self.time.lo > self.time.hi
            )
        )


def push_filters(spec: ScanSpec, filters: Iterable[Filter]) -> tuple[ScanSpec, list[Filter]]:
    """``spec`` with every filter it can apply exactly, and the filters Spark must still apply
    (the same objects, as ``pushFilters`` must return them)."""
    ranges = spec.index_ranges
    time = spec.time
    terms = list(spec.topic_terms)
    rest: list[Filter] = []
    for f in filters:
        attribute = getattr(f, "attribute", None)
        value = getattr(f, "value", None)
        if attribute == ("index",):
            number = _int_value(value)
            if isinstance(f, EqualTo | EqualNullSafe) and number is not None:
                ranges = intersect(ranges, ((number, number),))
            elif isinstance(f, GreaterThan) and number is not None:
                ranges = intersect(ranges, ((number + 1, MAX_INDEX),))
            elif isinstance(f, GreaterThanOrEqual) and number is not None:
                ranges = intersect(ranges, ((number, MAX_INDEX),))
            elif isinstance(f, LessThan) and number is not None:
                ranges = intersect(ranges, ((0, number - 1),))
            elif isinstance(f, LessThanOrEqual) and number is not None:
                ranges = intersect(ranges, ((0, number),))
            elif isinstance(f, In) and isinstance(value, list | tuple):
                numbers = [_int_value(v) for v in value if v is not None]
                if any(n is None for n in numbers):
                    rest.append(f)
                    continue
                ranges = intersect(ranges, from_points(n for n in numbers if n is not None))
            elif isinstance(f, IsNotNull):
                pass  # index is never null
            else:
                rest.append(f)
            continue
        if attribute == ("timestamp",):
            micros = to_micros(value)
            if isinstance(f, IsNull):
                time = time.with_null(True)
            elif isinstance(f, IsNotNull):
                time = time.with_null(False)
            elif micros is None:
                rest.append(f)
            elif isinstance(f, EqualTo | EqualNullSafe):
                time = time.with_lower(micros, True).with_upper(micros, True)
            elif isinstance(f, GreaterThan):
                time = time.with_lower(micros, False)
            elif isinstance(f, GreaterThanOrEqual):
                time = time.with_lower(micros, True)
            elif isinstance(f, LessThan):
                time = time.with_upper(micros, False)
            elif isinstance(f, LessThanOrEqual):
                time = time.with_upper(micros, True)
            else:
                rest.append(f)
            continue
        term = _topic_term(f)
        if term is None:
            rest.append(f)
        else:
            terms.append(term)
    return replace(spec, index_ranges=ranges, time=time, topic_terms=tuple(terms)), rest
