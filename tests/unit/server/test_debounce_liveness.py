"""Driver level (issue #12, finding 3): a follower whose answers are lost keeps hearing its
leader only through *retransmissions* -- the identical request under the same msgid, which
the peer service answers from its debounce cache without stepping the core. It must still
tell the core that the leader is alive, or the follower campaigns within one election
timeout although its leader never went away."""

from __future__ import annotations

from random import Random
from types import SimpleNamespace

from raftlog.consensus import CoreConfig, RaftCore, Role, SendReply
from raftlog.ids import RequestIdGenerator
from raftlog.metrics import PeerMetrics
from raftlog.rpc.messages import AppendEntries, ConfigPayload, Peer
from raftlog.server.peer_service import PeerService
from raftlog.server.replies import ServerReply
from raftlog.storage.base import HardState
from raftlog.storage.memory import MemoryHardStateStore, MemoryLogStore
from raftlog.storage.memory_snapshot import MemorySnapshotStore

PEERS = tuple(Peer(i, f"tcp://127.0.0.1:{5000 + n}") for n, i in enumerate(("n1", "n2", "n3")))


class FakeNode:
    """A real core and stores behind the real ``PeerService``; replies are recorded."""

    def __init__(self) -> None:
        self.metrics = PeerMetrics()
        self.sent: list[tuple[bytes, bytes, ServerReply]] = []
        self.log_store = MemoryLogStore()
        self.hard = MemoryHardStateStore()
        self.core = RaftCore(
            CoreConfig("n2", election_ticks=(20, 30), first_election_extra_ticks=0),
            self.log_store,
            MemorySnapshotStore(),
            HardState(current_term=1, config=ConfigPayload(PEERS)),
            seed_config=ConfigPayload(PEERS),
            rng=Random(3),
            new_request_id=RequestIdGenerator().next,
        )
        log = SimpleNamespace(warning=lambda *a, **k: None, info=lambda *a, **k: None)
        self.service = PeerService(self.core, self.core, self, self.metrics, log,
                                   max_entry_data=1024 * 1024)

    def reply(self, routing: bytes, msg_id: bytes, message: ServerReply) -> None:
        self.sent.append((routing, msg_id, message))

    def resends(self) -> int:
        return self.metrics.debounced_resends.value

    def handle_ready(self) -> None:
        """Persist -> send -> advance, as the ready executor does."""
        core = self.core
        while core.has_ready():
            ready = core.ready()
            if ready.hard_state is not None:
                self.hard.save(ready.hard_state)
            if ready.append is not None:
                self.log_store.append(ready.append.first_index, ready.append.entries)
            for out in (*ready.messages_now, *ready.messages_after_persist):
                if isinstance(out, SendReply):
                    self.service.send_reply(out.token, out.message)
            core.advance(ready)


def test_retransmissions_answered_from_the_debounce_cache_keep_the_follower_following() -> None:
    node = FakeNode()
    heartbeat = AppendEntries("n1", 1, 0, 0, 0)
    node.service.from_leader(b"leader-routing", b"\x07", heartbeat)
    node.handle_ready()
    assert node.core.leader_id == "n1" and len(node.sent) == 1
    # The leader's answer is lost; it re-sends the identical request every 10 ticks (well
    # within the 20-30 tick election timeout) for 3 s of ticks.
    for tick in range(1, 301):
        node.core.tick()
        if tick % 10 == 0:
            node.service.from_leader(b"leader-routing", b"\x07", heartbeat)
        node.handle_ready()
        assert node.core.role is Role.FOLLOWER, f"campaigned at tick {tick}"
    assert node.core.term == 1 and node.core.leader_id == "n1"
    assert node.resends() == 30  # every resend answered from the cache
    assert all(sent == node.sent[0] for sent in node.sent)


def test_only_the_current_leader_and_term_hold_back_an_election() -> None:
    node = FakeNode()
    old = AppendEntries("n1", 1, 0, 0, 0)
    node.service.from_leader(b"r1", b"\x01", old)
    node.handle_ready()
    for tick in range(1, 41):  # signs of life from others do not count
        node.core.tick()
        if tick % 5 == 0:
            node.core.heard_from_leader("n3", 1)  # not its leader
            node.core.heard_from_leader("n1", 0)  # not its term
        node.handle_ready()
    assert node.core.role is Role.CANDIDATE and node.core.term == 2
    node.service.from_leader(b"r1", b"\x01", old)  # a resend from the old term: nothing
    node.handle_ready()
    assert node.core.role is Role.CANDIDATE and node.core.term == 2
