"""The Kafka listener's memory limits as Prometheus metrics: the group coordinator's size
and refusals, the Fetch answer bytes held and the reads deferred.

Why: those limits (``[kafka]``) turn a JoinGroup or Fetch flood into refusals and smaller
answers; an operator needs to see how close the listener runs to them and what they refused,
in the same ``/metrics`` as the listener's connection guard (``PeerObserver.expose``).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from raftlog.kafka.context import KafkaContext
from raftlog.web.byte_budget import held_gauges


class KafkaCollector(Collector):
    """``raftlog_kafka_group_*``: members, groups and held bytes against their limits, and
    the joins refused by reason; ``raftlog_kafka_fetch_*``: the answer bytes held and the
    reads deferred (read from the HTTP thread: counts only, no iteration over the
    groups)."""

    def __init__(self, ctx: KafkaContext) -> None:
        self._ctx = ctx

    def collect(self) -> Iterator[Metric]:
        """The gauges and counters."""
        yield from self._fetch()
        co, limits = self._ctx.coordinator, self._ctx.coordinator.limits
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

    def _fetch(self) -> Iterator[Metric]:
        memory = self._ctx.fetch_memory
        yield from held_gauges("raftlog_kafka_fetch", "Record bytes of Fetch answers being "
                               "built or sent now.", "[kafka] fetch_memory_bytes", memory)
        yield CounterMetricFamily("raftlog_kafka_fetch_reads_deferred",
                                  "Partition reads of a Fetch skipped for want of fetch "
                                  "memory (the partition answered no records that round).",
                                  value=memory.deferred)
        yield from held_gauges("raftlog_kafka_request", "Bytes of request frames being read "
                               "or handled now.", "[kafka] request_memory_bytes",
                               self._ctx.request_memory)


__all__ = ["KafkaCollector"]
