"""A connection guard's state and event totals as Prometheus metrics.

Why a module of its own: the HTTP listener serves ``/metrics`` and registers its own
guard's collector; the Kafka listener, which starts later and has no registry, has its guard
served there too (``PeerObserver.expose``). Both come out of the one table below.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from raftlog.observability.guard import ConnectionGuard

GUARD_EVENTS: Final = (
    ("connections_refused", "connections_refused_total",
     "{what} connections refused at accept (listener busy or the address at its cap)."),
    ("connections_evicted", "connections_evicted_total",
     "Idle or half-open {what} connections closed to admit a new one (listener full)."),
    ("connections_reaped", "connections_reaped_total",
     "{what} connections closed past their first-request or idle time-out (reaper passes)."),
    ("connections_stalled", "connections_stalled_total",
     "{what} connections aborted because their client took none of an answer for "
     "send_timeout_ms (the answer freed)."),
    ("accept_failed", "accept_failures_total",
     "Failed accepts of the {what} listener (e.g. out of descriptors)."),
    ("handshake_failed", "tls_handshake_failures_total",
     "TLS handshakes of the {what} listener that failed or timed out."),
)
"""(event, metric, help) of a guard named ``name``: its log event ``{name}_{event}`` is
counted as ``raftlog_{name}_{metric}``."""


class GuardCollector(Collector):
    """A connection guard's state and event totals as Prometheus metrics (``raftlog_http_*``
    for the HTTP listener's, ``raftlog_kafka_*`` for the Kafka listener's)."""

    def __init__(self, guard: ConnectionGuard, what: str = "HTTP") -> None:
        self._guard = guard
        self._what = what

    def collect(self) -> Iterator[Metric]:
        """Open connections, the cap, and each event's total."""
        guard, what, prefix = self._guard, self._what, f"raftlog_{self._guard.name}"
        yield GaugeMetricFamily(f"{prefix}_connections",
                                f"{what} connections open now.", value=guard.open)
        yield GaugeMetricFamily(f"{prefix}_connection_cap",
                                f"{what} connections admitted at most (max_connections, "
                                "within the listener's share of RLIMIT_NOFILE).", value=guard.cap)
        for event, metric, help_text in GUARD_EVENTS:
            yield CounterMetricFamily(f"{prefix}_{metric}".removesuffix("_total"),
                                      help_text.format(what=what),
                                      value=guard.flood.totals[f"{guard.name}_{event}"])


__all__ = ["GUARD_EVENTS", "GuardCollector"]
