"""``PeerView``: an immutable picture of one peer, published by the loop, read by HTTP.

Why a published snapshot rather than reading the node from the HTTP thread: the core, the
stores and the services are single-threaded objects; reading them from another thread could
see a half-updated state (or, for RocksDB iterators, race a write). The loop instead builds
a frozen :class:`PeerView` at most every ``PUBLISH_INTERVAL`` and replaces one reference --
an atomic store in CPython -- so the cost on the loop is a few attribute reads per interval
and the readers never lock anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from raftlog.observability.elections import LeaderChange
from raftlog.topics.counters import TopicStat
from raftlog.topics.groups.host import GroupStat

PUBLISH_INTERVAL: Final = 0.2
"""Seconds between two published views: fresh enough for a status page and a scrape,
cheap enough to be invisible next to the loop's per-message work."""


@dataclass(frozen=True, slots=True)
class MemberView:
    """One member of the configuration as the publishing peer sees it."""

    id: str
    url: str
    voter_in: str
    """``"new"``, ``"old"`` or ``"both"``: which side of a (joint) configuration lists it."""
    match_index: int | None = None
    """Highest index known replicated to it (leader only; None elsewhere)."""
    link_up: bool | None = None
    """Whether the publishing peer's own Raft link to it is connected (its channel's gate,
    the ``raftlog_peer_link_up`` gauge); None for the publishing peer itself. A member that
    answers the status poll while this is False is reachable by clients but not by this
    peer's consensus traffic: an asymmetric partition or a peer-key mismatch."""


@dataclass(frozen=True, slots=True)
class PeerView:
    """What one peer knows about itself and the cluster at ``published_at``."""

    peer_id: str
    role: str
    term: int
    leader_id: str | None
    commit_index: int
    applied_index: int
    first_index: int
    last_index: int
    config_index: int
    config_joint: bool
    members: tuple[MemberView, ...]
    pending_updates: int
    """RequestUpdate/publish requests waiting for their entry to be applied."""
    open_entries_streams: int
    """RequestEntries pipelines currently served."""
    topics: int
    """Topics that exist as of the applied index."""
    topic_names: tuple[str, ...] = ()
    """Their names, sorted (the status page lists them; at most ``MAX_TOPIC_NAMES``)."""
    topic_stats: tuple[TopicStat, ...] = ()
    """Per-topic totals ``(topic, records, bytes, published_records, published_bytes,
    expired_records, expired_bytes)``, sorted by name (at most ``MAX_TOPIC_NAMES``)."""
    kv_stats: tuple[tuple[str, int, int], ...] = ()
    """Compacted topics' ``(topic, live keys, live bytes)`` (issue #29; recounted every
    ``raftlog.topics.kv_state.STATS_INTERVAL`` seconds)."""
    group_stats: tuple[GroupStat, ...] = ()
    """Per consumer group ``(group, mode, lag, pending, redelivered, dead_lettered,
    delivered, acked)`` (issue #27; at most ``MAX_TOPIC_NAMES``, by name)."""
    elections: tuple[LeaderChange, ...] = ()
    """The last leader changes this peer lived through, newest first."""
    disk_free_bytes: int | None = None
    """Free bytes in this peer's data directory at the disk guard's last look (None: not
    measured); the status page and ``raftlog_disk_free_bytes`` show it per peer."""
    min_free_disk_bytes: int = 0
    """The disk guard's threshold (0: off); below it this peer refuses publishes as leader."""
    published_at: float = field(default_factory=time.monotonic)
    """``time.monotonic()`` when the loop built it: a stale view means a stuck loop."""
    wall_time: float = field(default_factory=time.time)

    @property
    def is_leader(self) -> bool:
        """True when this peer leads (its match indexes are then meaningful)."""
        return self.role == "leader"

    def lag_of(self, member: MemberView) -> int | None:
        """Entries a follower is behind this leader's log (None when not leader)."""
        if member.match_index is None:
            return None
        return max(0, self.last_index - member.match_index)


class ViewBox:
    """Holds the latest :class:`PeerView`; written by the loop, read by any thread."""

    def __init__(self) -> None:
        self._view: PeerView | None = None

    def publish(self, view: PeerView) -> None:
        """Replace the view (one reference store: atomic for readers)."""
        self._view = view

    def latest(self) -> PeerView | None:
        """The last published view, or None before the first one."""
        return self._view


class ViewPublisher:
    """Calls ``build`` and publishes its result at most every ``interval`` seconds.

    The loop calls :meth:`maybe_publish` on every timer pass; most calls are one float
    compare."""

    def __init__(
        self, box: ViewBox, build: Callable[[], PeerView], interval: float = PUBLISH_INTERVAL
    ) -> None:
        self._box = box
        self._build = build
        self._interval = interval
        self._next = 0.0

    def maybe_publish(self, now: float) -> None:
        """Publish a fresh view if the last one is ``interval`` old."""
        if now >= self._next:
            self._next = now + self._interval
            self._box.publish(self._build())


def members_of(
    new: tuple[tuple[str, str], ...],
    old: tuple[tuple[str, str], ...] | None,
    match: Mapping[str, int] | None,
    links: Mapping[str, bool] | None = None,
) -> tuple[MemberView, ...]:
    """Members of a (possibly joint) configuration given as (id, url) pairs, each tagged
    with the side(s) listing it, on a leader its match index, and the state of this peer's
    link to it where ``links`` knows one."""
    links = links or {}
    old_ids = {pid for pid, _ in old or ()}
    new_ids = {pid for pid, _ in new}
    out: list[MemberView] = []
    seen: set[str] = set()
    for pid, url in (*new, *(old or ())):
        if pid in seen:
            continue
        seen.add(pid)
        side = "both" if pid in old_ids and pid in new_ids else "new" if pid in new_ids else "old"
        if old is None:
            side = "new"
        matched = None if match is None else match.get(pid)
        out.append(MemberView(pid, url, side, matched, links.get(pid)))
    return tuple(out)
