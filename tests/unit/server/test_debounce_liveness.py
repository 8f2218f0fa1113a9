"""Driver level (issue #12, finding 3): a follower whose answers are lost keeps hearing its
leader only through *retransmissions* -- the identical request under the same msgid, which
the dispatcher answers from its debounce cache without stepping the core. The dispatcher must
still tell the core that the leader is alive, or the follower campaigns within one election
timeout although its leader never went away."""

from __future__ import annotations

from collections import Counter
from random import Random
from types import SimpleNamespace
from typing import Any

from raftlog.consensus import CoreConfig, RaftCore, Role
from raftlog.ids import RequestIdGenerator
from raftlog.options import RaftOptions
from raftlog.rpc.codec import encode_request
from raftlog.rpc.frames import encode_msg_id
from raftlog.rpc.messages import AppendEntries, ConfigPayload, Peer
from raftlog.server.dispatch import Dispatcher
from raftlog.storage.base import HardState
from raftlog.storage.memory import MemoryHardStateStore, MemoryLogStore, MemorySnapshotStore

IDENT = "cluster"
PEERS = tuple(Peer(i, f"tcp://127.0.0.1:{5000 + n}") for n, i in enumerate(("n1", "n2", "n3")))


class FakeNode:
    """The parts of ``PeerNode`` the dispatcher touches, around a real core and stores."""

    def __init__(self) -> None:
        self.settings = SimpleNamespace(ident=IDENT, options=RaftOptions(), pub_url="tcp://x:1")
        self.stats: Counter[str] = Counter()
        self.log = SimpleNamespace(warning=lambda *a, **k: None, info=lambda *a, **k: None)
        self.topics: Any = None
        self.sent: list[tuple[bytes, list[bytes]]] = []
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
        self.dispatcher = Dispatcher(self)  # type: ignore[arg-type]

    def reply(self, routing: bytes, frames: list[bytes]) -> None:
        self.sent.append((routing, frames))

    def handle_ready(self) -> None:
        """Persist -> send -> advance, as ``PeerNode._handle_ready`` does."""
        core = self.core
        while core.has_ready():
            ready = core.ready()
            if ready.hard_state is not None:
                self.hard.save(ready.hard_state)
            if ready.append is not None:
                self.log_store.append(ready.append.first_index, ready.append.entries)
            for out in (*ready.messages_now, *ready.messages_after_persist):
                token = getattr(out, "token", None)
                if token is not None:
                    self.dispatcher.send_peer_reply(token, out.message)  # type: ignore[arg-type]
            core.advance(ready)


def test_retransmissions_answered_from_the_debounce_cache_keep_the_follower_following() -> None:
    node = FakeNode()
    heartbeat = encode_request(
        AppendEntries("n1", 1, 0, 0, 0), ident=IDENT.encode(), id=encode_msg_id(7)
    )
    node.dispatcher.on_message([b"leader-routing", *heartbeat])
    node.handle_ready()
    assert node.core.leader_id == "n1" and len(node.sent) == 1
    # The leader's answer is lost; it re-sends the identical request every 10 ticks (well
    # within the 20-30 tick election timeout) for 3 s of ticks.
    for tick in range(1, 301):
        node.core.tick()
        if tick % 10 == 0:
            node.dispatcher.on_message([b"leader-routing", *heartbeat])
        node.handle_ready()
        assert node.core.role is Role.FOLLOWER, f"campaigned at tick {tick}"
    assert node.core.term == 1 and node.core.leader_id == "n1"
    assert node.stats["debounced_resend"] == 30  # every resend answered from the cache
    assert all(frames == node.sent[0][1] for _, frames in node.sent)


def test_only_the_current_leader_and_term_hold_back_an_election() -> None:
    node = FakeNode()
    old = encode_request(AppendEntries("n1", 1, 0, 0, 0), ident=IDENT.encode(), id=b"\x01")
    node.dispatcher.on_message([b"r1", *old])
    node.handle_ready()
    for tick in range(1, 41):  # signs of life from others do not count
        node.core.tick()
        if tick % 5 == 0:
            node.core.heard_from_leader("n3", 1)  # not its leader
            node.core.heard_from_leader("n1", 0)  # not its term
        node.handle_ready()
    assert node.core.role is Role.CANDIDATE and node.core.term == 2
    node.dispatcher.on_message([b"r1", *old])  # a resend from the old term changes nothing
    node.handle_ready()
    assert node.core.role is Role.CANDIDATE and node.core.term == 2
