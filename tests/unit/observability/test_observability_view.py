"""PeerView, the view builder, the publisher's pacing and the health rules (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from raftlog.consensus import Role
from raftlog.observability.build import MAX_TOPIC_NAMES, build_peer_view
from raftlog.observability.collector import group_metrics
from raftlog.observability.elections import LeaderChange
from raftlog.observability.health import (
    STALE_AFTER,
    loop_verdict,
    ready_verdict,
    storage_verdict,
)
from raftlog.observability.view import PeerView, ViewBox, ViewPublisher, members_of
from raftlog.rpc.messages import ConfigPayload, Peer
from raftlog.topics.counters import TopicCounters, TopicStat
from raftlog.topics.groups.host import GroupStat
from raftlog.topics.properties import TopicProperties
from raftlog.topics.state import TopicState


class FakeCore:
    def __init__(self, role: Role, config: ConfigPayload) -> None:
        self.peer_id = "1"
        self.role = role
        self.term = 7
        self.leader_id: str | None = None if role is Role.LEADER else "2"
        self.commit_index = 40
        self.applied_index = 38
        self.first_index = 1
        self.last_index = 42
        self.config = config
        self.config_index = 3

    def match_indexes(self) -> dict[str, int]:
        return {"2": 42, "3": 30} if self.role is Role.LEADER else {}


class FakeClients:
    pending_updates = 5


class FakeEntries:
    open_pipelines = 2


class FakeCounters:
    def stats(self, limit: int) -> tuple[TopicStat, ...]:
        return (("audit", 3, 30, 5, 50, 2, 20), ("orders", 1, 10, 1, 10, 0, 0))[:limit]

    def first_names(self, limit: int) -> tuple[str, ...]:
        return ("audit", "orders")[:limit]


class FakeKeyValue:
    stats = (("config", 3, 120),)
class FakeGroups:
    def stats(self, limit: int) -> tuple[GroupStat, ...]:
        return (("workers", "queue", 80, 3, 5, 1, 90, 7),)[:limit]


class FakeTopics:
    topics: Mapping[str, object] = {"orders": object(), "audit": object()}
    counters = FakeCounters()
    kv = FakeKeyValue()
    groups = FakeGroups()


class FakeElections:
    def recent(self) -> tuple[LeaderChange, ...]:
        return (LeaderChange(5.0, 7, "2", "new leader heard"),)


PEERS = tuple(Peer(i, f"tcp://127.0.0.1:{8000 + int(i)}") for i in ("1", "2", "3"))


def _view(**changes: object) -> PeerView:
    core = FakeCore(Role.FOLLOWER, ConfigPayload(new=PEERS))
    view = build_peer_view(core, FakeClients(), FakeEntries(), FakeTopics(), FakeElections())
    return replace(view, **changes)  # type: ignore[arg-type]


def test_leader_view_carries_every_members_match_and_lag() -> None:
    core = FakeCore(Role.LEADER, ConfigPayload(new=PEERS))
    view = build_peer_view(core, FakeClients(), FakeEntries(), FakeTopics(), FakeElections())
    assert view.is_leader and view.leader_id == "1"
    lags = {m.id: view.lag_of(m) for m in view.members}
    assert lags == {"1": 0, "2": 0, "3": 12}
    assert (view.pending_updates, view.open_entries_streams, view.topics) == (5, 2, 2)
    assert [s[0] for s in view.topic_stats] == ["audit", "orders"]
    assert view.group_stats == (("workers", "queue", 80, 3, 5, 1, 90, 7),)
    text = "\n".join(str(m) for m in group_metrics(view))
    assert "raftlog_group_lag" in text and "workers" in text
    assert view.elections == (LeaderChange(5.0, 7, "2", "new leader heard"),)


def test_follower_view_has_no_match_indexes() -> None:
    view = _view()
    assert view.leader_id == "2"
    assert all(m.match_index is None and view.lag_of(m) is None for m in view.members)


class FakeLinks:
    def link_states(self) -> dict[str, bool]:
        return {"2": True, "3": False}


def test_each_member_carries_this_peers_link_to_it() -> None:
    core = FakeCore(Role.FOLLOWER, ConfigPayload(new=PEERS))
    view = build_peer_view(
        core, FakeClients(), FakeEntries(), FakeTopics(), FakeElections(), links=FakeLinks()
    )
    assert {m.id: m.link_up for m in view.members} == {"1": None, "2": True, "3": False}
    unlinked = _view()  # a view built without the channels knows no link
    assert all(m.link_up is None for m in unlinked.members)


def test_joint_configuration_tags_each_side() -> None:
    new = (PEERS[0], PEERS[1], Peer("4", "tcp://127.0.0.1:8004"))
    members = members_of(
        tuple((p.id, p.url) for p in new), tuple((p.id, p.url) for p in PEERS), None
    )
    assert {m.id: m.voter_in for m in members} == {"1": "both", "2": "both", "4": "new", "3": "old"}


def test_publisher_builds_at_most_once_per_interval() -> None:
    box = ViewBox()
    built: list[int] = []

    def build() -> PeerView:
        built.append(1)
        return _view()

    publisher = ViewPublisher(box, build, interval=0.2)
    for now in (10.0, 10.05, 10.1, 10.19, 10.21, 10.3):
        publisher.maybe_publish(now)
    assert len(built) == 2
    assert box.latest() is not None


def test_loop_verdict_needs_a_fresh_view() -> None:
    assert not loop_verdict(None).ok
    view = _view(published_at=100.0)
    assert loop_verdict(view, now=100.5).ok
    stale = loop_verdict(view, now=100.0 + STALE_AFTER + 1)
    assert not stale.ok and "stuck" in stale.reason and stale.status == 503


def test_ready_needs_a_member_with_a_leader_and_little_apply_lag() -> None:
    now = 50.0
    assert ready_verdict(_view(published_at=now), max_lag=10, now=now).ok
    assert (
        "no known leader" in ready_verdict(_view(leader_id=None, published_at=now), 10, now).reason
    )
    assert "CLIENT" in ready_verdict(_view(role="client", published_at=now), 10, now).reason
    behind = ready_verdict(_view(applied_index=10, commit_index=40, published_at=now), 10, now)
    assert not behind.ok and "30 behind" in behind.reason


def test_storage_verdict_writes_and_removes_its_probe(tmp_path: Path) -> None:
    assert storage_verdict(tmp_path).ok
    assert list(tmp_path.iterdir()) == []
    missing = storage_verdict(tmp_path / "gone")
    assert not missing.ok and "not writable" in missing.reason


def test_the_view_carries_the_disk_guards_reading() -> None:
    """Issue #33 item 7: per-peer disk use on the status page and in /metrics."""

    class Disk:
        free = 123_456
        threshold = 64 << 20

    core = FakeCore(Role.FOLLOWER, ConfigPayload(new=PEERS))
    view = build_peer_view(
        core, FakeClients(), FakeEntries(), FakeTopics(), FakeElections(), disk=Disk()
    )
    assert (view.disk_free_bytes, view.min_free_disk_bytes) == (123_456, 64 << 20)
    assert _view().disk_free_bytes is None


def test_the_view_names_the_first_topics_by_name_whatever_their_number() -> None:
    """The view names the first ``MAX_TOPIC_NAMES`` topics by name, however many exist."""

    names = [f"t{(n * 7919) % 2000:05d}" for n in range(2000)]
    counters = TopicCounters(cast(Any, None), cast(Any, None), cast(Any, None))
    for name in names:
        counters.topic_set(name, 1, TopicState(TopicProperties(), 1))  # as the machine's create

    class ManyTopics(FakeTopics):
        topics: Mapping[str, object] = {name: object() for name in names}

    ManyTopics.counters = counters  # type: ignore[assignment]
    core = FakeCore(Role.FOLLOWER, ConfigPayload(new=PEERS))
    view = build_peer_view(core, FakeClients(), FakeEntries(), ManyTopics(), FakeElections())
    assert view.topics == 2000
    assert view.topic_names == tuple(sorted(ManyTopics.topics)[:MAX_TOPIC_NAMES])
    assert len(view.topic_names) == MAX_TOPIC_NAMES < 2000
    assert [s[0] for s in view.topic_stats] == list(view.topic_names)
