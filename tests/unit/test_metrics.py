"""raftlog.metrics: typed families with label sets, what an exporter reads."""

from __future__ import annotations

import pytest

from raftlog import speedups
from raftlog.metrics import Counter, Gauge, Histogram, PeerMetrics, Registry, Sample


def test_counters_count_per_label_set_and_export_as_totals() -> None:
    dropped = Counter("x_dropped", "help", ("reason",))
    malformed = dropped.labels(reason="malformed")
    assert malformed is dropped.labels(reason="malformed")  # cached child: cheap hot path
    assert malformed.inc() == 1 and malformed.inc(2) == 3
    dropped.labels(reason="ident").inc()
    assert list(dropped.samples()) == [
        Sample("x_dropped_total", (("reason", "malformed"),), 3),
        Sample("x_dropped_total", (("reason", "ident"),), 1),
    ]


def test_wrong_labels_and_negative_increments_are_refused() -> None:
    family = Counter("c", "help", ("reason",))
    with pytest.raises(ValueError, match="labels"):
        family.labels(kind="x")
    with pytest.raises(ValueError, match="labels"):
        family.inc()  # needs its label
    with pytest.raises(ValueError, match="only goes up"):
        family.labels(reason="r").inc(-1)


def test_gauges_go_both_ways() -> None:
    gauge = Gauge("streams", "help")
    gauge.set(4)
    gauge.labels().inc(-1.5)
    assert list(gauge.samples()) == [Sample("streams", (), 2.5)]


def test_histograms_export_cumulative_buckets_sum_and_count() -> None:
    hist = Histogram("fsync_seconds", "help", buckets=(0.01, 0.1))
    for value in (0.005, 0.05, 0.05, 3.0):
        hist.observe(value)
    assert [(s.name, s.labels, s.value) for s in hist.samples()] == [
        ("fsync_seconds_bucket", (("le", "0.01"),), 1),
        ("fsync_seconds_bucket", (("le", "0.1"),), 3),
        ("fsync_seconds_bucket", (("le", "+Inf"),), 4),
        ("fsync_seconds_sum", (), pytest.approx(3.105)),
        ("fsync_seconds_count", (), 4),
    ]


def test_a_registry_holds_each_name_once() -> None:
    registry = Registry()
    registry.register(Counter("a", "help"))
    with pytest.raises(ValueError, match="twice"):
        registry.register(Gauge("a", "help"))


def test_peer_metrics_declare_what_a_peer_counts_and_summarise_non_zero_totals() -> None:
    metrics = PeerMetrics()
    names = [family.name for family in metrics.registry.collect()]
    assert "raftlog_messages_dropped" in names and len(names) == len(set(names))
    assert all(family.help for family in metrics.registry.collect())
    metrics.messages_dropped.labels(reason="wrong_ident").inc()
    metrics.replies_dropped.inc(2)
    assert metrics.registry.totals() == {
        "raftlog_messages_dropped{reason=wrong_ident}": 1,
        "raftlog_replies_dropped": 2,
    }


def test_the_compiled_twins_gauge_says_which_twins_run() -> None:
    samples = {
        dict(s.labels)["twins"]: s.value
        for family in PeerMetrics().registry.collect()
        if family.name == "raftlog_compiled_twins"
        for s in family.samples()
    }
    assert samples == {name: float(on) for name, on in speedups.COMPILED.items()}
    assert set(samples) == {"records", "transport"}
