"""The metric primitives of :mod:`raftlog.metrics`: counter, gauge and histogram families
with label sets, and the registry an exporter walks.

Why apart from the catalogue (``raftlog.metrics.PeerMetrics``): these are the mechanism, the
catalogue is the list of what a peer counts; keeping them apart keeps both small. Import
them from :mod:`raftlog.metrics`, which re-exports them.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeVar

MetricType = Literal["counter", "gauge", "histogram"]

DEFAULT_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
"""Seconds: fsync and loop-pass durations live between a millisecond and a few seconds."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One exported value: ``name`` (with ``_bucket``/``_sum``/``_count`` for histograms),
    its labels and its value (Prometheus' exposition model)."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


class CounterValue:
    """One counter time series: only goes up."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def inc(self, amount: int = 1) -> int:
        """Add ``amount`` (>= 0); returns the new total (callers sample their logs on it)."""
        if amount < 0:
            raise ValueError("a counter only goes up")
        self.value += amount
        return self.value


class GaugeValue:
    """One gauge time series: a value that goes up and down."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def set(self, value: float) -> None:
        """Replace the value."""
        self.value = value

    def inc(self, amount: float = 1.0) -> None:
        """Add ``amount`` (may be negative)."""
        self.value += amount


class HistogramValue:
    """One histogram time series: counts per upper bound, sum and count."""

    __slots__ = ("bounds", "buckets", "count", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.buckets = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        """Record one observation."""
        self.buckets[bisect.bisect_left(self.bounds, value)] += 1
        self.count += 1
        self.sum += value

    def observe_many(self, value: float, times: int) -> None:
        """Record ``times`` observations of ``value`` (a batch's updates waited alike)."""
        self.buckets[bisect.bisect_left(self.bounds, value)] += times
        self.count += times
        self.sum += value * times


class _Family:
    """A named metric with fixed label names; one child per label-value tuple."""

    kind: MetricType

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = ()) -> None:
        self.name = name
        self.help = help
        self.labelnames = tuple(labelnames)

    def _key(self, labels: dict[str, str]) -> tuple[str, ...]:
        if set(labels) != set(self.labelnames):
            raise ValueError(f"{self.name} takes labels {self.labelnames}, got {tuple(labels)}")
        return tuple(str(labels[name]) for name in self.labelnames)


class Counter(_Family):
    """A family of counters (e.g. messages dropped, labelled by reason)."""

    kind: MetricType = "counter"

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = ()) -> None:
        super().__init__(name, help, labelnames)
        self._children: dict[tuple[str, ...], CounterValue] = {}

    def labels(self, **labels: str) -> CounterValue:
        """The series for these label values (created at zero on first use, then cached)."""
        key = self._key(labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = CounterValue()
        return child

    def inc(self, amount: int = 1) -> int:
        """Bump the unlabelled series; returns its new total."""
        return self.labels().inc(amount)

    @property
    def value(self) -> int:
        """The unlabelled series' total (0 before any increment)."""
        child = self._children.get(())
        return 0 if child is None else child.value

    def series(self) -> Iterator[tuple[tuple[str, ...], CounterValue]]:
        """Every series with its label values."""
        yield from self._children.items()

    def samples(self) -> Iterator[Sample]:
        """What an exporter shows (Prometheus names counters ``*_total``)."""
        for key, child in self._children.items():
            yield Sample(
                self.name + "_total", tuple(zip(self.labelnames, key, strict=True)), child.value
            )


class Gauge(_Family):
    """A family of gauges (e.g. open RequestEntries streams)."""

    kind: MetricType = "gauge"

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = ()) -> None:
        super().__init__(name, help, labelnames)
        self._children: dict[tuple[str, ...], GaugeValue] = {}

    def labels(self, **labels: str) -> GaugeValue:
        """The series for these label values (created at zero, then cached)."""
        key = self._key(labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = GaugeValue()
        return child

    def set(self, value: float) -> None:
        """Set the unlabelled series."""
        self.labels().set(value)

    def remove(self, **labels: str) -> None:
        """Forget the series for these label values (what it measured is gone, e.g. a peer
        removed from the configuration): a stale value would look current to an alert."""
        self._children.pop(self._key(labels), None)

    def samples(self) -> Iterator[Sample]:
        """What an exporter shows."""
        for key, child in self._children.items():
            yield Sample(self.name, tuple(zip(self.labelnames, key, strict=True)), child.value)


class Histogram(_Family):
    """A family of histograms (e.g. fsync seconds per Ready)."""

    kind: MetricType = "histogram"

    def __init__(
        self,
        name: str,
        help: str,
        labelnames: Sequence[str] = (),
        buckets: Sequence[float] = DEFAULT_BUCKETS,
    ) -> None:
        super().__init__(name, help, labelnames)
        self.bounds = tuple(sorted(buckets))
        self._children: dict[tuple[str, ...], HistogramValue] = {}

    def labels(self, **labels: str) -> HistogramValue:
        """The series for these label values (created empty, then cached)."""
        key = self._key(labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = HistogramValue(self.bounds)
        return child

    def observe(self, value: float) -> None:
        """Record into the unlabelled series."""
        self.labels().observe(value)

    def series(self) -> Iterator[tuple[tuple[str, ...], HistogramValue]]:
        """Every series with its label values (an exporter builds its buckets from these)."""
        yield from self._children.items()

    def samples(self) -> Iterator[Sample]:
        """Cumulative ``_bucket`` series with ``le``, then ``_sum`` and ``_count``."""
        for key, child in self._children.items():
            labels = tuple(zip(self.labelnames, key, strict=True))
            running = 0
            for bound, count in zip((*self.bounds, math.inf), child.buckets, strict=True):
                running += count
                le = "+Inf" if bound == math.inf else repr(bound)
                yield Sample(self.name + "_bucket", (*labels, ("le", le)), running)
            yield Sample(self.name + "_sum", labels, child.sum)
            yield Sample(self.name + "_count", labels, child.count)


Family = Counter | Gauge | Histogram
FamilyT = TypeVar("FamilyT", Counter, Gauge, Histogram)


class Registry:
    """The metrics of one peer, in declaration order, each name once."""

    def __init__(self) -> None:
        self._families: dict[str, Family] = {}

    def register(self, family: Family) -> None:
        """Add ``family``; a second metric of the same name is a programming error."""
        if family.name in self._families:
            raise ValueError(f"metric {family.name} registered twice")
        self._families[family.name] = family

    def collect(self) -> Iterator[Family]:
        """Every family (an exporter turns each into its own metric family)."""
        yield from self._families.values()

    def samples(self) -> Iterator[Sample]:
        """Every sample of every family."""
        for family in self._families.values():
            yield from family.samples()

    def totals(self) -> dict[str, float]:
        """Non-zero counter totals as ``name`` or ``name{label=value}`` keys: the summary
        a peer logs when it stops."""
        out: dict[str, float] = {}
        for family in self._families.values():
            if isinstance(family, Counter):
                for key, child in family.series():
                    if child.value:
                        labels = ",".join(
                            f"{n}={v}" for n, v in zip(family.labelnames, key, strict=True)
                        )
                        out[f"{family.name}{{{labels}}}" if labels else family.name] = child.value
        return out
