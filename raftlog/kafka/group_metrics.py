"""The Kafka group coordinator's size and refusals as Prometheus metrics.

Why: the coordinator's limits (``[kafka]`` group limits) turn a JoinGroup flood into
refusals; an operator needs to see how close the listener runs to them and what it refused,
in the same ``/metrics`` as the listener's connection guard (``PeerObserver.expose``).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from raftlog.kafka.coordinator import Coordinator


class CoordinatorCollector(Collector):
    """``raftlog_kafka_group_*``: members, groups and held bytes against their limits, and
    the joins refused by reason (read from the HTTP thread: counts only, no iteration over
    the groups)."""

    def __init__(self, coordinator: Coordinator) -> None:
        self._coordinator = coordinator

    def collect(self) -> Iterator[Metric]:
        """The gauges and the refusal counter."""
        co, limits = self._coordinator, self._coordinator.limits
        yield GaugeMetricFamily("raftlog_kafka_groups", "Kafka groups with members or "
                                "joiners on this listener (only the leader's has any).",
                                value=len(co.groups))
        yield GaugeMetricFamily("raftlog_kafka_group_members",
                                "Members of all Kafka groups on this listener.", value=co.members)
        yield GaugeMetricFamily("raftlog_kafka_group_members_limit",
                                "[kafka] max_group_members.", value=limits.max_members)
        yield GaugeMetricFamily("raftlog_kafka_group_held_bytes",
                                "Client-chosen bytes the group coordinator holds (member ids, "
                                "protocol metadata, assignments).", value=co.held_bytes)
        yield GaugeMetricFamily("raftlog_kafka_group_held_bytes_limit",
                                "[kafka] max_group_state_bytes.", value=limits.max_state_bytes)
        refused = CounterMetricFamily("raftlog_kafka_group_joins_refused",
                                      "JoinGroups (and assignments) refused by the group "
                                      "limits, by reason.", labels=["reason"])
        for reason, count in sorted(co.refusals.items()):
            refused.add_metric([reason], count)
        yield refused


__all__ = ["CoordinatorCollector"]
