"""The peer's leader-change ring, the ROUTER connection monitor, the snapshot transfer
meters and the page's publish rates (fakes and in-process sockets, no peer)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import zmq

from raftlog import sockets
from raftlog.consensus import Role
from raftlog.metrics import PeerMetrics
from raftlog.observability.cluster_poll import ClusterPoller, PublishRates
from raftlog.observability.connections import ConnectionMonitor
from raftlog.observability.elections import ElectionLog, LeaderChange
from raftlog.observability.probes import ReceivedSnapshots, SentSnapshots
from raftlog.observability.view import MemberView, PeerView, ViewBox
from raftlog.rpc.messages import InstallSnapshot, Peer, PeerRequest, PeerResponse
from raftlog.storage.memory_snapshot import MemorySnapshotStore


def _clock(times: list[float]) -> Callable[[], float]:
    return lambda: times[0]


def test_the_ring_tells_why_the_leader_changed() -> None:
    now = [100.0]
    ring = ElectionLog("1", keep=4, clock=_clock(now))
    ring.on_soft_state(Role.FOLLOWER, None, 1)  # start-up: nothing changed yet
    ring.on_soft_state(Role.FOLLOWER, "2", 1)
    now[0] = 110.0
    ring.on_soft_state(Role.FOLLOWER, None, 2)  # a vote request of a higher term
    ring.on_soft_state(Role.CANDIDATE, None, 3)
    ring.on_soft_state(Role.LEADER, "1", 3)
    ring.on_stepped_down(3, "check_quorum")
    got = [(c.term, c.leader_id, c.reason) for c in ring.recent()]
    assert got == [
        (3, None, "stepped down: lost contact with a quorum"),
        (3, "1", "won the election"),
        (3, None, "election started here (no leader heard within the timeout)"),
        (2, None, "term 2 began (a peer asked for votes); leader 2 of term 1 no longer followed"),
    ]  # newest first, at most ``keep``
    assert ring.recent()[-1].time == 110.0


def test_a_step_down_reads_in_term_order_and_once() -> None:
    """Issue #33 item 7: a leader that sees a higher term reported 'term 5: no leader ·
    leader 1 lost (term 5)' and then its term-4 step-down above it."""
    now = [1.0]
    ring = ElectionLog("1", clock=_clock(now))
    ring.on_soft_state(Role.CANDIDATE, None, 4)
    ring.on_soft_state(Role.LEADER, "1", 4)
    now[0] = 2.0
    ring.on_soft_state(Role.FOLLOWER, None, 5)  # a higher term seen...
    now[0] = 3.0
    ring.on_stepped_down(4, "higher_term")  # ...then the step-down of the term it led
    ring.on_soft_state(Role.FOLLOWER, "2", 5)
    got = [(c.term, c.reason) for c in ring.recent()]
    assert got == [
        (5, "new leader heard"),
        (4, "stepped down: saw a higher term"),
        (4, "won the election"),
        (4, "election started here (no leader heard within the timeout)"),
    ]


def test_a_role_change_without_a_leader_change_is_not_an_election() -> None:
    ring = ElectionLog("4")
    ring.on_soft_state(Role.FOLLOWER, "1", 5)
    ring.on_soft_state(Role.CLIENT, "1", 5)  # removed from the configuration
    assert [c.reason for c in ring.recent()] == ["new leader heard"]


def _wait(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_the_monitor_counts_connections_accepted_and_closed() -> None:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    metrics = PeerMetrics()
    router = sockets.peer_router(context, "tcp://127.0.0.1:*", max_message_size=1024)
    url = router.getsockopt_string(zmq.LAST_ENDPOINT)
    monitor = ConnectionMonitor(router, metrics)
    try:
        dealers = [sockets.client_dealer(context, url) for _ in range(3)]
        _wait(lambda: metrics.client_connects.value == 3)
        assert metrics.client_connections.labels().value == 3
        dealers[0].close(linger=0)
        _wait(lambda: metrics.client_disconnects.value == 1)
        assert metrics.client_connections.labels().value == 2
        for dealer in dealers[1:]:
            dealer.close(linger=0)
        _wait(lambda: metrics.client_connections.labels().value == 0)
    finally:
        monitor.stop()
        monitor.stop()  # idempotent
        router.close(linger=0)
        context.term()  # hangs if the monitor's PAIR socket were left open


class _Listener:
    """A ``ConnectionListener`` that records what it hears."""

    def __init__(self) -> None:
        self.opened: list[int] = []
        self.ended: list[int] = []
        self.ticks = 0

    def accepted(self, fd: int) -> None:
        self.opened.append(fd)

    def closed(self, fd: int) -> None:
        self.ended.append(fd)

    def tick(self, now: float) -> None:
        self.ticks += 1


def test_a_caps_only_monitor_tells_its_listener_of_connections_and_counts_nothing() -> None:
    """The PUB broadcast's monitor (``ticks=False``, no metrics): its listener hears of
    each connection, is never ticked (no backlog scans, a wake-up every 200 ms rather than
    20), and the ROUTER's client metrics stay untouched."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    metrics = PeerMetrics()
    pub = sockets.broadcast_pub(context, "tcp://127.0.0.1:*")
    url = pub.getsockopt_string(zmq.LAST_ENDPOINT)
    listener = _Listener()
    monitor = ConnectionMonitor(pub, None, listener, ticks=False)
    try:
        sub = context.socket(zmq.SUB)
        sub.connect(url)
        _wait(lambda: len(listener.opened) == 1)
        sub.close(linger=0)
        _wait(lambda: listener.ended == listener.opened)
        time.sleep(0.3)
        assert listener.ticks == 0
        assert metrics.client_connects.value == 0
    finally:
        monitor.stop()
        pub.close(linger=0)
        context.term()


def test_snapshots_received_are_timed_from_the_first_chunk_to_the_install() -> None:
    metrics = PeerMetrics()
    store = ReceivedSnapshots(MemorySnapshotStore(), metrics)
    assert store.begin(10, 2, 6) == 0
    store.write_chunk(0, b"abc")
    assert store.begin(10, 2, 6) == 3  # the next chunk of the same snapshot
    store.write_chunk(3, b"def")
    meta = store.finish()
    assert (meta.index, meta.size) == (10, 6)
    assert store.meta() == meta and store.read(0, 6) == b"abcdef"
    store.install(11, 2, b"local")  # a compaction's snapshot: not a transfer
    received = {"direction": "received"}
    assert metrics.snapshot_transfers.labels(**received).value == 1
    assert metrics.snapshot_transfer_bytes.labels(**received).value == 6
    assert metrics.snapshot_transfer_seconds.labels(**received).count == 1


class RecordingOutbox:
    def __init__(self) -> None:
        self.sent: list[tuple[str, PeerRequest]] = []

    def connect(self, peers: Sequence[Peer]) -> None:
        pass

    def send_request(self, to: str, message: PeerRequest) -> None:
        self.sent.append((to, message))

    def send_reply(self, token: object, message: PeerResponse) -> None:
        pass


def test_snapshots_sent_count_per_follower_and_ignore_retransmissions() -> None:
    metrics = PeerMetrics()
    inner = RecordingOutbox()
    outbox = SentSnapshots(inner, metrics)
    first = InstallSnapshot("1", 3, 50, 3, 0, 8, b"abcd")
    outbox.send_request("2", first)
    outbox.send_request("2", first)  # retransmitted: the same object
    outbox.send_request("3", InstallSnapshot("1", 3, 50, 3, 0, 8, b"abcdefgh"))  # one chunk
    last = InstallSnapshot("1", 3, 50, 3, 4, 8, b"efgh")
    outbox.send_request("2", last)
    outbox.send_request("2", last)
    assert len(inner.sent) == 5  # every send passes through
    sent = {"direction": "sent"}
    assert metrics.snapshot_transfers.labels(**sent).value == 2
    assert metrics.snapshot_transfer_bytes.labels(**sent).value == 16
    assert metrics.snapshot_transfer_seconds.labels(**sent).count == 2


def _view(at: float, *stats: tuple[str, int, int, int, int, int, int]) -> PeerView:
    return PeerView(
        peer_id="1",
        role="leader",
        term=2,
        leader_id="1",
        commit_index=5,
        applied_index=5,
        first_index=1,
        last_index=5,
        config_index=1,
        config_joint=False,
        members=(MemberView("1", "tcp://a:1", "new"),),
        pending_updates=0,
        open_entries_streams=0,
        topics=len(stats),
        topic_stats=stats,
        published_at=at,
    )


def test_publish_rates_average_the_counters_over_the_window() -> None:
    rates = PublishRates(window=10.0)
    rates.observe(_view(0.0, ("t", 0, 0, 100, 0, 0, 0)))
    assert rates.rate("t") is None  # one sample
    rates.observe(_view(2.0, ("t", 0, 0, 300, 0, 0, 0)))
    assert rates.rate("t") == 100.0
    rates.observe(_view(2.0, ("t", 0, 0, 999, 0, 0, 0)))  # the same view again: ignored
    for second in range(3, 15):
        rates.observe(_view(float(second), ("t", 0, 0, 300 + 50 * (second - 2), 0, 0, 0)))
    assert rates.rate("t") == 50.0  # only the last ten seconds count
    rates.observe(_view(15.0, ("t", 0, 0, 10, 0, 0, 0)))  # re-created: counts from zero
    assert rates.rate("t") is not None and rates.rate("t") >= 0
    assert rates.rate("missing") is None


def test_the_page_data_carries_this_peers_link_to_each_member() -> None:
    views = ViewBox()
    poller = ClusterPoller(views, "ident")
    members = (
        MemberView("1", "tcp://a:1", "new", link_up=True),  # never its own link
        MemberView("2", "tcp://a:2", "new", link_up=True),
        MemberView("3", "tcp://a:3", "new", link_up=False),
        MemberView("4", "tcp://a:4", "new"),  # a view that knows no link for it
    )
    views.publish(replace(_view(1.0), members=members))
    rows = {row["id"]: row for row in poller.snapshot()["members"]}
    assert {pid: row["link_up"] for pid, row in rows.items()} == {
        "1": None, "2": True, "3": False, "4": None
    }


def test_the_page_data_carries_topics_and_the_peers_own_elections() -> None:
    views = ViewBox()
    poller = ClusterPoller(views, "ident")
    view = replace(
        _view(1.0, ("orders", 4, 40, 9, 90, 5, 50)),
        elections=(LeaderChange(50.0, 2, "1", "won the election"),),
    )
    views.publish(view)
    poller.rates.observe(view)
    data = poller.snapshot()
    assert data["elections"] == [
        {"time": 50.0, "term": 2, "leader_id": "1", "reason": "won the election"}
    ]
    assert data["topics"]["stats"] == [
        {
            "name": "orders",
            "records": 4,
            "bytes": 40,
            "published": 9,
            "published_bytes": 90,
            "expired": 5,
            "rate": None,
        }
    ]
