"""Typed, named metrics: what a peer counts, declared in one place, readable by an exporter.

Why not a ``Counter[str]``: string keys bumped in several files had no list of what exists,
no help text and no types, so nothing could export them. Here every metric is declared once
(:class:`PeerMetrics`), with a name, a help text and its label names, in the shape
Prometheus uses (counter / gauge / histogram families with label sets), so exposing them
through ``prometheus_client`` later is one custom collector walking
:meth:`Registry.collect` -- no call site changes.

Cheap on the hot path: a labelled child is looked up once and kept (``family.labels(...)``
caches it; call sites that bump often hold the child), and ``inc`` is one attribute add. The
peer is single-threaded, so no locks; an exporter reads from the same thread or tolerates a
value that is one increment old.
"""

from __future__ import annotations

from typing import Final

from raftlog import speedups
from raftlog.metrics_base import (
    DEFAULT_BUCKETS,
    Counter,
    CounterValue,
    Family,
    FamilyT,
    Gauge,
    GaugeValue,
    Histogram,
    HistogramValue,
    MetricType,
    Registry,
    Sample,
)

__all__ = [
    "BATCH_BUCKETS",
    "DEFAULT_BUCKETS",
    "TRANSFER_BUCKETS",
    "Counter",
    "CounterValue",
    "Family",
    "Gauge",
    "GaugeValue",
    "Histogram",
    "HistogramValue",
    "MetricType",
    "PeerMetrics",
    "Registry",
    "Sample",
]

BATCH_BUCKETS: Final = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
"""Entries per synced write: 1 when idle, hundreds when group commit gathers a burst."""

TRANSFER_BUCKETS: Final = (0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
"""Seconds: a snapshot transfer takes from milliseconds (tiny state) to minutes."""


class PeerMetrics:
    """Everything a peer counts today (one instance per peer; tests make their own)."""

    def __init__(self) -> None:
        # One method per area, so a new metric goes beside its kin; the call order is the
        # registration order, which is the order of the /metrics exposition.
        self.registry = Registry()
        self._declare_inbound()
        self._declare_loop()
        self._declare_security()
        self._declare_consensus()
        self._declare_storage()
        self._declare_clients()
        self._declare_compaction()
        self._declare_clock()
        self._declare_connections()
        self._declare_snapshots()

    def _declare_inbound(self) -> None:
        """What arrives that the peer drops or refuses without answering it normally: a peer never
        crashes on what a network sends, so these counters are where bad input shows."""
        self.messages_dropped = self._add(
            Counter(
                "raftlog_messages_dropped",
                "Inbound ROUTER messages dropped without an answer, by reason (malformed, "
                "wrong ident, unknown sender, ...): a peer never crashes on what a network sends.",
                ("reason",),
            )
        )
        self.replies_dropped = self._add(
            Counter(
                "raftlog_replies_dropped",
                "Replies not sent because the ROUTER could not route them (client gone).",
            )
        )
        self.bad_peer_responses = self._add(
            Counter(
                "raftlog_bad_peer_responses",
                "Responses from other peers that failed to decode (dropped, never fatal).",
            )
        )
        self.debounced_resends = self._add(
            Counter(
                "raftlog_debounced_resends",
                "Retransmitted AppendEntries/InstallSnapshot answered from the cached reply.",
            )
        )
        self.truncations_refused = self._add(
            Counter(
                "raftlog_truncations_refused",
                "Leader requests to overwrite committed entries, refused (docs/protocol.md §12).",
            )
        )
        self.topic_publishes_refused = self._add(
            Counter(
                "raftlog_topic_publishes_refused",
                "Topic entries the leader refused to propose, by way in (publish/update).",
                ("via",),
            )
        )

    def _declare_loop(self) -> None:
        """How long the consensus loop is held up, and the elections it declined (issue #12)."""
        self.loop_pass_seconds = self._add(
            Histogram(
                "raftlog_loop_pass_seconds",
                "Duration of one pass of the peer's loop (drain, ticks, Readies, streaming): "
                "a pass near the election timeout starves heartbeats and elections.",
            )
        )
        self.max_loop_stall_seconds = self._add(
            Gauge(
                "raftlog_max_loop_stall_seconds",
                "Longest single pass of the peer's loop since it started.",
            )
        )
        self.loop_stalls = self._add(
            Counter(
                "raftlog_loop_stalls",
                "Loop passes longer than a quarter of election_timeout_min.",
            )
        )
        compiled = self._add(
            Gauge(
                "raftlog_compiled_twins",
                "1 where this peer runs the compiled twins of a set of hot loops "
                "(raftlog/speedups.py), 0 where it runs the pure-Python ones: a peer built "
                "without a C compiler spends a quarter to a third more CPU per update.",
                ("twins",),
            )
        )
        for twins, on in speedups.COMPILED.items():
            compiled.labels(twins=twins).set(1 if on else 0)
        self.campaigns_refused = self._add(
            Counter(
                "raftlog_campaigns_refused",
                "Elections not started because the term is at the ceiling (raftlog.bounds); "
                "repair with raftlog-tool reset-term.",
            )
        )

    def _declare_security(self) -> None:
        """Who was refused and why: CURVE access, shed connections, quotas (issue #25), ZAP."""
        self.access_refused = self._add(
            Counter(
                "raftlog_access_refused",
                "Requests a CURVE peer refused with an access-denied answer, by reason "
                "(unknown_key, role, peer_impersonation).",
                ("reason",),
            )
        )
        self.connections_shed = self._add(
            Counter(
                "raftlog_connections_shed",
                "ROUTER and PUB connections the peer shut down, by reason: libzmq held too "
                "much of what they sent (connection_backlog), they left too many answers "
                "unread (answer_backlog), the process was above memory_high_water "
                "(memory_high), a connection cap (max_connections, per_address, broadcast_*) "
                "or a principal's connections quota (quota_connections).",
                ("reason",),
            )
        )
        self.quota_refusals = self._add(
            Counter(
                "raftlog_quota_refusals",
                "Requests refused because their principal was over a quota (issue #25), by "
                "principal (the client's name; 'address' for every per-address principal "
                "of a plaintext cluster, so the label stays bounded) and kind (publish_rate, "
                "streams, waiting_reads).",
                ("principal", "kind"),
            )
        )
        self.zap_handshakes = self._add(
            Counter(
                "raftlog_zap_handshakes",
                "CURVE handshakes the ZAP handler decided, by result (accepted, refused).",
                ("result",),
            )
        )

    def _declare_consensus(self) -> None:
        """Leadership changes seen from this peer."""
        self.elections_started = self._add(
            Counter(
                "raftlog_elections_started",
                "Times this peer became a candidate (a rising rate means an unstable leader "
                "or a partitioned peer).",
            )
        )
        self.elections_won = self._add(
            Counter("raftlog_elections_won", "Times this peer became the leader.")
        )

    def _declare_storage(self) -> None:
        """The durable write path: every acknowledgement waits for one of these fsyncs."""
        self.fsync_seconds = self._add(
            Histogram(
                "raftlog_fsync_duration_seconds",
                "Wall time of one synced Ready write (hard state + entries, one fdatasync): "
                "the floor of every acknowledgement's latency.",
            )
        )
        self.fsync_batch_entries = self._add(
            Histogram(
                "raftlog_fsync_batch_entries",
                "Entries written by one synced Ready write (group commit's batch size).",
                buckets=BATCH_BUCKETS,
            )
        )
        self.entries_appended = self._add(
            Counter(
                "raftlog_log_entries_appended",
                "Log entries made durable on this peer (own proposals or replicated).",
            )
        )
        self.entries_applied = self._add(
            Counter(
                "raftlog_log_entries_applied",
                "Committed log entries applied to the state machines on this peer.",
            )
        )

    def _declare_clients(self) -> None:
        """Client updates on the leader: what they cost and how they ended."""
        self.update_latency_seconds = self._add(
            Histogram(
                "raftlog_update_latency_seconds",
                "On the leader: from accepting a RequestUpdate/publish to its committed "
                "reply (append, fsync, replication to a majority, apply).",
            )
        )
        self.proposals = self._add(
            Counter(
                "raftlog_proposals",
                "Client updates offered to the leader, by result (appended, duplicate of a "
                "retried request id, not_leader, expired, refused by the topic rules).",
                ("result",),
            )
        )

    def _declare_compaction(self) -> None:
        """Log compaction (a snapshot installed, the log prefix dropped)."""
        self.compactions = self._add(
            Counter(
                "raftlog_compactions",
                "Log compactions: a state-machine snapshot installed and the log prefix dropped "
                "(threshold or raftlog-admin compact).",
            )
        )
        self.compaction_seconds = self._add(
            Histogram(
                "raftlog_compaction_duration_seconds",
                "Wall time of one compaction from its start (the snapshot is built a step "
                "a timer pass while the peer goes on) to the install and prefix drop.",
            )
        )

    def _declare_clock(self) -> None:
        """The host's clock against the cluster clock carried in the log (issue #24)."""
        self.wall_clock_offset_seconds = self._add(
            Gauge(
                "raftlog_wall_clock_offset_seconds",
                "This host's wall clock minus the cluster clock (raftlog.cluster_clock). "
                "Nothing is decided by the wall clock; far from 0 on one peer: fix its NTP; "
                "on every peer: the cluster clock is catching up after an outage.",
            )
        )

    def _declare_connections(self) -> None:
        """The peer's connections: its ROUTER's (issue #14) and its channels to the other
        peers (their link gates, ``raftlog.server.peers``)."""
        self.client_connections = self._add(
            Gauge(
                "raftlog_client_connections",
                "TCP connections open on the peer's ROUTER now (clients, the other peers' "
                "channels and status pollers), from the socket's monitor events.",
            )
        )
        self.peer_link_up = self._add(
            Gauge(
                "raftlog_peer_link_up",
                "1 while this peer's channel to the other peer is connected (handshake done), "
                "0 while not: requests for a peer that is down are dropped, not queued.",
                ("peer",),
            )
        )
        self.peer_requests_dropped = self._add(
            Counter(
                "raftlog_peer_requests_dropped",
                "Requests to another peer not sent: its link was down or its queue full (the "
                "consensus core sends again on its timeout).",
                ("peer",),
            )
        )
        self.client_connects = self._add(
            Counter(
                "raftlog_client_connects",
                "TCP connections the peer's ROUTER accepted (a fast rise: clients "
                "reconnecting in a loop).",
            )
        )
        self.client_disconnects = self._add(
            Counter(
                "raftlog_client_disconnects",
                "TCP connections to the peer's ROUTER that closed.",
            )
        )

    def _declare_snapshots(self) -> None:
        """Snapshot transfers between peers (issue #14)."""
        self.snapshot_transfers = self._add(
            Counter(
                "raftlog_snapshot_transfers",
                "Snapshots sent to followers with InstallSnapshot (direction=sent, on the "
                "leader) or received and installed (direction=received).",
                ("direction",),
            )
        )
        self.snapshot_transfer_bytes = self._add(
            Counter(
                "raftlog_snapshot_transfer_bytes",
                "Snapshot data bytes of the completed transfers, by direction.",
                ("direction",),
            )
        )
        self.snapshot_transfer_seconds = self._add(
            Histogram(
                "raftlog_snapshot_transfer_duration_seconds",
                "From a transfer's first chunk to its last (sent: the last chunk sent; "
                "received: the snapshot installed), by direction.",
                ("direction",),
                buckets=TRANSFER_BUCKETS,
            )
        )

    def _add(self, family: FamilyT) -> FamilyT:
        self.registry.register(family)
        return family
