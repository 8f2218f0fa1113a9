"""Builds a :class:`PeerView` from the parts of a running peer (called by the loop).

Takes narrow Protocols, not ``PeerNode``, so the view is testable with fakes and the node
keeps no monitoring code beyond one call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Protocol

from raftlog.consensus import Role
from raftlog.observability.elections import LeaderChange
from raftlog.observability.view import PeerView, members_of
from raftlog.rpc.messages import ConfigPayload
from raftlog.topics.counters import TopicStat
from raftlog.topics.groups.host import GroupStat

MAX_TOPIC_NAMES: Final = 500
"""Topics a view (and so /metrics and the page) carries at most, the first by name (the
count is always exact): a label set per topic is what a Prometheus server can afford."""


class CoreReadings(Protocol):
    """What the view reads from ``RaftCore`` (all cheap properties)."""

    @property
    def peer_id(self) -> str: ...
    @property
    def role(self) -> Role: ...
    @property
    def term(self) -> int: ...
    @property
    def leader_id(self) -> str | None: ...
    @property
    def commit_index(self) -> int: ...
    @property
    def applied_index(self) -> int: ...
    @property
    def first_index(self) -> int: ...
    @property
    def last_index(self) -> int: ...
    @property
    def config(self) -> ConfigPayload: ...
    @property
    def config_index(self) -> int: ...
    def match_indexes(self) -> dict[str, int]: ...


class PendingUpdates(Protocol):
    """The client service: how many updates wait for their reply."""

    @property
    def pending_updates(self) -> int: ...


class OpenStreams(Protocol):
    """The RequestEntries service: how many pipelines it serves."""

    @property
    def open_pipelines(self) -> int: ...


class TopicTotalsSource(Protocol):
    """Per-topic totals (``TopicCounters``)."""

    def stats(self, limit: int) -> tuple[TopicStat, ...]: ...
    def first_names(self, limit: int) -> tuple[str, ...]: ...


class GroupStatsSource(Protocol):
    """Per consumer group figures (``GroupHost.stats``, issue #27)."""

    def stats(self, limit: int) -> tuple[GroupStat, ...]: ...


class TopicCatalog(Protocol):
    """The topic machine: the topics that exist as of the applied index, their totals, and
    the consumer groups."""

    @property
    def topics(self) -> Mapping[str, object]: ...
    @property
    def counters(self) -> TopicTotalsSource: ...
    @property
    def kv(self) -> KeyValueStats: ...
    @property
    def groups(self) -> GroupStatsSource: ...


class KeyValueStats(Protocol):
    """The compacted topics' live keys and bytes (``raftlog.topics.kv_state``)."""

    @property
    def stats(self) -> tuple[tuple[str, int, int], ...]: ...


class DiskReadings(Protocol):
    """The disk guard's last measurement (``raftlog.server.disk_guard.DiskGuard``)."""

    @property
    def free(self) -> int: ...
    @property
    def threshold(self) -> int: ...


class PeerLinks(Protocol):
    """This peer's Raft links (``raftlog.server.peers.PeerChannels``): the page shows each
    member's, because a member can answer the page's poll while consensus cannot reach it."""

    def link_states(self) -> dict[str, bool]: ...


class RecentElections(Protocol):
    """The peer's own ring of leader changes (``ElectionLog``)."""

    def recent(self) -> tuple[LeaderChange, ...]: ...


def build_peer_view(
    core: CoreReadings,
    clients: PendingUpdates,
    entries: OpenStreams,
    topics: TopicCatalog,
    elections: RecentElections,
    *,
    disk: DiskReadings | None = None,
    links: PeerLinks | None = None,
) -> PeerView:
    """A fresh view (a few attribute reads, one dict copy of the leader's progress)."""
    config = core.config
    leader = core.role is Role.LEADER
    match = core.match_indexes() if leader else None
    if match is not None:
        match[core.peer_id] = core.last_index  # the leader has its own log
    return PeerView(
        peer_id=core.peer_id,
        role=core.role.value,
        term=core.term,
        leader_id=core.peer_id if leader else core.leader_id,
        commit_index=core.commit_index,
        applied_index=core.applied_index,
        first_index=core.first_index,
        last_index=core.last_index,
        config_index=core.config_index,
        config_joint=config.is_joint,
        members=members_of(
            tuple((p.id, p.url) for p in config.new),
            None if config.old is None else tuple((p.id, p.url) for p in config.old),
            match,
            None if links is None else links.link_states(),
        ),
        pending_updates=clients.pending_updates,
        open_entries_streams=entries.open_pipelines,
        topics=len(topics.topics),
        topic_names=topics.counters.first_names(MAX_TOPIC_NAMES),
        topic_stats=topics.counters.stats(MAX_TOPIC_NAMES),
        kv_stats=topics.kv.stats[:MAX_TOPIC_NAMES],
        group_stats=topics.groups.stats(MAX_TOPIC_NAMES),
        elections=elections.recent(),
        disk_free_bytes=None if disk is None or disk.free < 0 else disk.free,
        min_free_disk_bytes=0 if disk is None else disk.threshold,
    )
