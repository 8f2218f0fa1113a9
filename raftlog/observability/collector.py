"""A ``prometheus_client`` collector over :mod:`raftlog.metrics` and the latest view.

Why a custom collector instead of ``prometheus_client``'s own metric objects: the peer
counts in its typed, lock-free registry (single thread, one attribute add per event); the
collector turns that registry, plus the gauges the loop's :class:`PeerView` carries, into
metric families only when scraped -- the hot path never touches ``prometheus_client``.
Reading the registry from the HTTP thread may see a value one increment old, which a
scrape tolerates.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from raftlog.metrics import Counter, Gauge, Histogram, Registry
from raftlog.observability.view import PeerView, ViewBox

ROLES = ("follower", "candidate", "leader", "client")


class PeerCollector(Collector):
    """Every metric of one peer, labelled with nothing but what varies (ids as labels)."""

    def __init__(self, registry: Registry, views: ViewBox, *, topics: bool = True) -> None:
        self._registry = registry
        self._views = views
        self._topics = topics
        """Per-topic series on (``[http] topic_metrics``; off, no topic name appears)."""

    def collect(self) -> Iterator[Metric]:
        """Called by ``prometheus_client.generate_latest`` on each scrape."""
        yield from self._from_registry()
        view = self._views.latest()
        if view is not None:
            yield from view_metrics(view, topics=self._topics)

    def _from_registry(self) -> Iterator[Metric]:
        for family in list(self._registry.collect()):
            labelnames = list(family.labelnames)
            if isinstance(family, Counter):
                counter = CounterMetricFamily(family.name, family.help, labels=labelnames)
                for key, child in list(family.series()):
                    counter.add_metric(list(key), child.value)
                yield counter
            elif isinstance(family, Gauge):
                gauge = GaugeMetricFamily(family.name, family.help, labels=labelnames)
                for sample in list(family.samples()):
                    gauge.add_metric([v for _, v in sample.labels], sample.value)
                yield gauge
            elif isinstance(family, Histogram):
                yield _histogram(family)


def _histogram(family: Histogram) -> HistogramMetricFamily:
    out = HistogramMetricFamily(family.name, family.help, labels=list(family.labelnames))
    bounds = [*(_le(b) for b in family.bounds), "+Inf"]
    for key, child in list(family.series()):
        running = 0
        buckets: list[tuple[str, float]] = []
        for bound, count in zip(bounds, list(child.buckets), strict=True):
            running += count
            buckets.append((bound, running))
        # count from the buckets, so a scrape racing an observe stays self-consistent
        out.add_metric(list(key), buckets, child.sum)
    return out


def _le(bound: float) -> str:
    """Prometheus' spelling of a bucket bound (``0.005``, ``16.0``)."""
    return repr(float(bound))


def view_metrics(view: PeerView, *, topics: bool = True) -> Iterator[Metric]:
    """The gauges a view carries (role, term, indexes, members, followers' lag; per-topic
    series unless ``topics`` is off)."""
    role = GaugeMetricFamily(
        "raftlog_role", "1 for this peer's current role, 0 for the others.", labels=["role"]
    )
    for name in ROLES:
        role.add_metric([name], 1.0 if view.role == name else 0.0)
    yield role
    yield GaugeMetricFamily("raftlog_term", "Current Raft term.", value=view.term)
    leader = GaugeMetricFamily(
        "raftlog_leader",
        "1 labelled with the leader's id this peer knows; absent when it knows none.",
        labels=["leader_id"],
    )
    if view.leader_id is not None:
        leader.add_metric([view.leader_id], 1.0)
    yield leader
    yield GaugeMetricFamily(
        "raftlog_is_leader", "1 when this peer leads, else 0.", value=1.0 if view.is_leader else 0.0
    )
    for name, help, value in (
        ("raftlog_commit_index", "Highest log index known committed.", view.commit_index),
        (
            "raftlog_applied_index",
            "Highest index applied to the state machines.",
            view.applied_index,
        ),
        (
            "raftlog_log_first_index",
            "First index still in the log (after compaction).",
            view.first_index,
        ),
        ("raftlog_log_last_index", "Last index in this peer's log.", view.last_index),
        ("raftlog_config_index", "Index of the configuration in effect.", view.config_index),
        (
            "raftlog_config_joint",
            "1 during a joint configuration C(old,new).",
            1.0 if view.config_joint else 0.0,
        ),
        ("raftlog_cluster_members", "Peers in the configuration in effect.", len(view.members)),
        (
            "raftlog_pending_updates",
            "Client updates waiting for their entry to be applied.",
            view.pending_updates,
        ),
        (
            "raftlog_request_entries_streams",
            "RequestEntries pipelines served now.",
            view.open_entries_streams,
        ),
        ("raftlog_topics", "Topics that exist as of the applied index.", view.topics),
    ):
        yield GaugeMetricFamily(name, help, value=float(value))
    if view.disk_free_bytes is not None:
        yield GaugeMetricFamily(
            "raftlog_disk_free_bytes",
            "Free bytes in the data directory (the disk guard refuses publishes below "
            "min_free_disk_bytes).",
            value=float(view.disk_free_bytes),
        )
    match = GaugeMetricFamily(
        "raftlog_follower_match_index",
        "On the leader: highest index known replicated to each peer.",
        labels=["peer_id"],
    )
    lag = GaugeMetricFamily(
        "raftlog_follower_lag_entries",
        "On the leader: entries each peer is behind the leader's last index.",
        labels=["peer_id"],
    )
    for member in view.members:
        behind = view.lag_of(member)
        if member.match_index is not None and behind is not None:
            match.add_metric([member.id], float(member.match_index))
            lag.add_metric([member.id], float(behind))
    yield match
    yield lag
    if topics:  # group names are as telling as topic names: the same switch
        yield from topic_metrics(view)
        yield from group_metrics(view)


TOPIC_FAMILIES: Final = (
    # (name, help, kind, index in a TopicStat)
    ("raftlog_topic_records", "Records a topic retains (time/size retention window).", 1),
    ("raftlog_topic_bytes", "Bytes of the records a topic retains.", 2),
    (
        "raftlog_topic_records_published",
        "Records published to a topic and applied on this peer since it started "
        "(rate() is the publish rate).",
        3,
    ),
    ("raftlog_topic_bytes_published", "Bytes published to a topic since the peer started.", 4),
    (
        "raftlog_topic_records_expired",
        "Records time or size retention removed from a topic since the peer started.",
        5,
    ),
    ("raftlog_topic_bytes_expired", "Bytes retention removed from a topic since start.", 6),
)


GROUP_FAMILIES: Final = (
    ("raftlog_group_lag", "Records a consumer group has not consumed yet: queue groups not "
     "yet delivered or waiting for redelivery, stream groups after the committed position.", 2),
    ("raftlog_group_pending", "Records a queue group has leased and not yet had acked.", 3),
    ("raftlog_group_redelivered", "Redeliveries of a queue group since its creation.", 4),
    ("raftlog_group_dead_lettered", "Records a queue group dead-lettered since its creation.", 5),
    ("raftlog_group_delivered", "Deliveries of a queue group since its creation.", 6),
    ("raftlog_group_acked", "Records a queue group had acked since its creation.", 7),
)


def group_metrics(view: PeerView) -> Iterator[Metric]:
    """Per consumer group series, labelled ``group`` and ``mode`` (issue #27); replicated
    figures, so every peer reports the same for the same applied index."""
    for name, help, field in GROUP_FAMILIES:
        family: GaugeMetricFamily | CounterMetricFamily
        if field <= 3:
            family = GaugeMetricFamily(name, help, labels=["group", "mode"])
        else:
            family = CounterMetricFamily(name, help, labels=["group", "mode"])
        for stat in view.group_stats:
            family.add_metric([stat[0], stat[1]], float(stat[field]))
        yield family


def topic_metrics(view: PeerView) -> Iterator[Metric]:
    """Per-topic gauges and counters, labelled ``topic`` (the view's first
    ``MAX_TOPIC_NAMES`` topics by name)."""
    for name, help, field in TOPIC_FAMILIES:
        family: GaugeMetricFamily | CounterMetricFamily
        if field <= 2:
            family = GaugeMetricFamily(name, help, labels=["topic"])
        else:
            family = CounterMetricFamily(name, help, labels=["topic"])
        for stat in view.topic_stats:
            family.add_metric([stat[0]], float(stat[field]))
        yield family
    keys = GaugeMetricFamily(
        "raftlog_kv_live_keys", "Live keys of a compacted topic (its key-value view).",
        labels=["topic"],
    )
    size = GaugeMetricFamily(
        "raftlog_kv_live_bytes", "Bytes (keys, values, headers) of a compacted topic's live "
        "records.", labels=["topic"],
    )
    for name, live_keys, live_bytes in view.kv_stats:
        keys.add_metric([name], float(live_keys))
        size.add_metric([name], float(live_bytes))
    yield keys
    yield size
