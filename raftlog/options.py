"""Peer options: every tunable of docs/protocol.md §13 with the reference's defaults and ranges.

Kept apart from the TOML loader (``raftlog.config``) so the driver, the CLI and tests can build
options programmatically. Times are milliseconds, sizes bytes, as in the reference's config.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Final

from raftlog.errors import ConfigError

MAX_DEAD_CONNECTION_MS: Final = 7_200_000
"""The longest ``dead_connection_timeout``: two hours (Linux's own keepalive default)."""


@dataclass(frozen=True, slots=True)
class RaftOptions:
    election_timeout_min: int = 200
    election_timeout_max: int = 300
    first_election_extra: int = 300
    rpc_timeout: int = 50
    append_entries_heartbeat_interval: int = 70
    append_entries_rpc_timeout_min: int = 70
    append_entries_rpc_timeout_max: int = 140
    peer_msg_data_size: int = 65536
    max_log_entry_data_size: int = 10 * 1024 * 1024
    request_id_ttl: int | None = 8 * 3600 * 1000
    request_id_ttl_accept_margin: int = 15 * 60 * 1000
    request_id_cache_max: int | None = None
    request_entries_high_watermark: int = 8000
    request_entries_ttl: int = 5000
    request_entries_pipelines: int = 5
    request_entries_entry_size_limit_pipeline: int = 65536
    request_entries_snapshot_pipelines: int = 2
    prevent_spiral_elections: bool = True
    broadcast_heartbeat_interval: int = 500
    replication_pipeline: int = 4
    """raftlog extension: AppendEntries in flight per follower that takes them -- one whose
    latest answer carried the pipelining mark (every raftlog follower's successes do); a
    reference (zmq-raft) follower always gets stop-and-wait, so any value is safe in a mixed
    cluster. 4 by measurement (docs/performance.md §2); 1 turns pipelining off."""
    catch_up_timeout: int = 30_000
    """ms a peer started outside its configuration spends downloading the committed log
    before it starts serving (§12.5); if the cluster is unreachable it starts anyway and is
    brought up to date by replication once added. 0 skips the download."""
    log_compaction_threshold: int = 0
    """raftlog extension: snapshot the state machine and drop the log prefix once this many
    applied entries lie beyond the last snapshot (never past the prune index, §12.7);
    0 keeps the whole log (the reference's default: it compacts only on request)."""
    min_free_disk_bytes: int = 64 << 20
    """raftlog extension (the disk guard, docs/operations.md §12): below this many free
    bytes in the data directory the leader refuses publishes (``DiskFull``) while deletes,
    retention and compaction go on, and accepts them again by itself once space is freed;
    0 turns the guard off."""
    max_records_per_entry: int = 16_384
    """raftlog extension: records one topic entry may publish at most (a record batch, a
    conditional batch, a transactional store); the leader refuses more (``TooManyRecords``)
    before decoding them. Why: every peer decodes and indexes each record as it applies the
    entry, in its loop -- one 10 MiB entry of 1.25 million empty records stalled each loop
    ~3 s and 13 elections followed; 16,384 take ~50 ms (``tests/faults/
    test_many_records.py``). Checked by the leader only, so peers need not agree."""
    tick_ms: int = 10
    """Length of one consensus tick; timeouts above are converted to ticks of this size."""
    topic_auto_create: bool = False
    """raftlog extension (topics, issue #7): a publish to a topic that does not exist creates
    it with default properties instead of being refused. Decided by the leader, which marks
    the entry, so every peer applies it the same way whatever its own setting."""
    storage_thread: bool = False
    """raftlog extension (issue #16): write each Ready's batch (one fsync) on a thread of its
    own, so the loop keeps receiving and stepping during the fsync. Off by default: on a
    starved CPU the thread's GIL hand-overs made loop stalls and elections worse, and it
    bought no throughput on the 2-core machine measured (docs/performance.md)."""
    exit_when_removed: bool = True
    """raftlog extension (issue #13): a peer that learns that a committed configuration removed
    it logs ``removed_from_cluster`` once and exits 0. False keeps it running as a non-voting
    follower (it never campaigns; it still answers clients and RequestEntries)."""

    max_connection_backlog: int = 0
    """raftlog extension (issue #25): wire bytes one ROUTER connection may have sent that the
    peer has not taken yet (messages libzmq holds, a multipart message still arriving); a
    connection past it is shut down (``raftlog.server.backlog``). 0: twice the
    per-message limit (``max_log_entry_data_size + peer_msg_data_size + 64 KiB``)."""
    max_answer_backlog: int = 0
    """raftlog extension: answer bytes one ROUTER connection may leave unread -- sent by the
    peer, not yet acknowledged by the client's TCP stack; a connection past it is shut down
    before its next message is handled (``raftlog.server.answer_backlog``). 0: 64 MiB."""
    memory_high_water: int = 2 * 1024 * 1024 * 1024
    """raftlog extension (issue #25): resident bytes above which the peer sheds the ROUTER
    connection with the largest backlog, one per scan, until below. 0: never."""

    max_client_connections: int = 0
    """raftlog extension (issue #25): connections the ROUTER keeps at most; one more sheds the
    oldest idle one (or itself). 0: half of the descriptor limit less a reserve (a tenth, at
    least 256) for the peer's own files; the other half is left to the HTTP listener."""
    max_connections_per_address: int = 0
    """raftlog extension (issue #25): connections from one source address at most (0: no
    cap). Per-address because a plaintext cluster knows nothing better at connect time;
    peers and the REST gateway of a host count too."""
    max_subscriber_connections: int = 0
    """raftlog extension: connections the PUB broadcast keeps at most (subscribers; one more
    sheds the oldest). 0: an eighth of the descriptor limit. Why: anyone may subscribe on a
    plaintext cluster, and a flood of subscriber connections used every descriptor of the
    peer; ``max_connections_per_address`` applies here too."""
    dead_connection_timeout: int = 60_000
    """raftlog extension: ms within which a connection the peer serves (its ROUTER's clients
    and peers, its PUB broadcast's subscribers) is closed once its remote host went silent
    (a host powered off, a partition, a NAT that forgot it): TCP keepalive probes after half
    of it idle, and data left unacknowledged this long ends it (``TCP_USER_TIMEOUT``;
    ``raftlog.sockets.ServedKeepalive``). Without it such a connection stays open for good
    (idle) or for TCP's ~15 minutes of retransmissions, holding a connection slot and a
    principal's connections quota. 0 turns it off (docs/operations.md §11)."""

    def validate(self) -> RaftOptions:
        """Check the reference's valid ranges (§13); raise ``ConfigError`` naming the option."""

        def need(ok: bool, name: str, rule: str) -> None:
            if not ok:
                raise ConfigError(f"option {name}={getattr(self, name)!r} is invalid: {rule}")

        need(self.election_timeout_min >= 100, "election_timeout_min", "must be >= 100")
        need(
            self.election_timeout_max >= self.election_timeout_min,
            "election_timeout_max",
            "must be >= election_timeout_min",
        )
        need(self.first_election_extra >= 0, "first_election_extra", "must be >= 0")
        need(
            10 <= self.rpc_timeout <= self.election_timeout_min,
            "rpc_timeout",
            "must be within 10 .. election_timeout_min",
        )
        need(
            self.rpc_timeout <= self.append_entries_heartbeat_interval <= self.election_timeout_min,
            "append_entries_heartbeat_interval",
            "must be within rpc_timeout .. election_timeout_min",
        )
        need(
            self.rpc_timeout <= self.append_entries_rpc_timeout_min <= self.election_timeout_min,
            "append_entries_rpc_timeout_min",
            "must be within rpc_timeout .. election_timeout_min",
        )
        need(
            self.append_entries_rpc_timeout_min
            <= self.append_entries_rpc_timeout_max
            <= self.election_timeout_min,
            "append_entries_rpc_timeout_max",
            "must be within append_entries_rpc_timeout_min .. election_timeout_min",
        )
        need(self.peer_msg_data_size >= 64, "peer_msg_data_size", "must be >= 64")
        need(self.max_log_entry_data_size >= 1, "max_log_entry_data_size", "must be >= 1")
        need(self.max_records_per_entry >= 1, "max_records_per_entry", "must be >= 1")
        need(self.max_connection_backlog >= 0, "max_connection_backlog", "must be >= 0")
        need(self.memory_high_water >= 0, "memory_high_water", "must be >= 0")
        need(self.max_answer_backlog >= 0, "max_answer_backlog", "must be >= 0")
        need(self.max_client_connections >= 0, "max_client_connections", "must be >= 0")
        need(self.max_subscriber_connections >= 0, "max_subscriber_connections", "must be >= 0")
        need(
            self.max_connections_per_address >= 0, "max_connections_per_address", "must be >= 0"
        )
        need(
            self.dead_connection_timeout == 0
            or 3_000 <= self.dead_connection_timeout <= MAX_DEAD_CONNECTION_MS,
            "dead_connection_timeout",
            f"must be 0 (off) or within 3000 .. {MAX_DEAD_CONNECTION_MS}",
        )
        need(
            self.request_id_ttl is None or 60_000 <= self.request_id_ttl <= 25 * 365 * 86_400_000,
            "request_id_ttl",
            "must be null or within 60000 .. 25 years",
        )
        need(
            self.request_id_ttl_accept_margin >= 1000
            and (
                self.request_id_ttl is None
                or self.request_id_ttl_accept_margin < self.request_id_ttl
            ),
            "request_id_ttl_accept_margin",
            "must be >= 1000 and below request_id_ttl",
        )
        need(
            self.request_id_cache_max is None or self.request_id_cache_max >= 1,
            "request_id_cache_max",
            "must be null or >= 1",
        )
        need(
            self.request_id_ttl is not None or self.request_id_cache_max is not None,
            "request_id_cache_max",
            "must be set when request_id_ttl is null",
        )
        need(
            self.request_entries_high_watermark >= 0,
            "request_entries_high_watermark",
            "must be >= 0",
        )
        need(self.request_entries_ttl >= 100, "request_entries_ttl", "must be >= 100")
        need(
            1 <= self.request_entries_pipelines <= 50,
            "request_entries_pipelines",
            "must be 1 .. 50",
        )
        need(
            self.request_entries_entry_size_limit_pipeline >= 1,
            "request_entries_entry_size_limit_pipeline",
            "must be >= 1",
        )
        need(
            1 <= self.request_entries_snapshot_pipelines <= 50,
            "request_entries_snapshot_pipelines",
            "must be 1 .. 50",
        )
        need(
            self.broadcast_heartbeat_interval >= 50, "broadcast_heartbeat_interval", "must be >= 50"
        )
        need(self.log_compaction_threshold >= 0, "log_compaction_threshold", "must be >= 0")
        need(self.min_free_disk_bytes >= 0, "min_free_disk_bytes", "must be >= 0")
        need(1 <= self.tick_ms <= self.rpc_timeout, "tick_ms", "must be within 1 .. rpc_timeout")
        need(isinstance(self.topic_auto_create, bool), "topic_auto_create", "must be true or false")
        need(isinstance(self.storage_thread, bool), "storage_thread", "must be true or false")
        return self

    def ticks(self, ms: int) -> int:
        """Convert a duration to whole ticks (at least one)."""
        return max(1, -(-ms // self.tick_ms))

    def with_overrides(self, values: dict[str, Any], source: str) -> RaftOptions:
        """A copy with ``values`` applied; unknown names and wrong types are ``ConfigError``s."""
        known = {f.name: f for f in fields(self)}
        clean: dict[str, Any] = {}
        for name, raw_value in values.items():
            key = name.replace("-", "_")
            if key not in known:
                raise ConfigError(f"{source}: unknown option {name!r}")
            current = getattr(self, key)
            value = raw_value
            if isinstance(value, str) and value.lower() in ("null", "none"):
                value = None  # TOML has no null: "null" / "none" stand for it
            if isinstance(current, bool) or key == "prevent_spiral_elections":
                if not isinstance(value, bool):
                    raise ConfigError(f"{source}: option {name} must be true or false")
            elif value is None:
                if key not in ("request_id_ttl", "request_id_cache_max"):
                    raise ConfigError(f"{source}: option {name} cannot be null")
            elif not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"{source}: option {name} must be an integer")
            clean[key] = value
        return replace(self, **clean)
