"""Build one ``RaftCore`` over in-memory stores and drive it with hand-built messages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import count
from random import Random
from typing import Any

from raftlog.consensus import (
    CoreConfig,
    RaftCore,
    Ready,
    Role,
    SendReply,
    SendRequest,
)
from raftlog.entry import EntryType, LogEntry
from raftlog.ids import make_request_id
from raftlog.rpc.config import encode_config_payload
from raftlog.rpc.messages import (
    AppendEntries,
    AppendEntriesResponse,
    ConfigPayload,
    Peer,
    PeerRequest,
    PeerResponse,
    RequestVote,
    RequestVoteResponse,
)
from raftlog.server.ready_executor import ReadyExecutor
from raftlog.storage.base import HardState
from raftlog.storage.memory import MemoryHardStateStore, MemoryLogStore
from raftlog.storage.memory_snapshot import MemorySnapshotStore
from raftlog.storage.ready_store import MemoryReadyStore

NOW_MS = 1_700_000_000_000
_counter = count(1)


def peer(peer_id: str) -> Peer:
    return Peer(peer_id, f"tcp://127.0.0.{int(peer_id[1:]) + 1}:5000")


def config(*ids: str, old: tuple[str, ...] | None = None) -> ConfigPayload:
    return ConfigPayload(
        new=tuple(peer(i) for i in ids),
        old=None if old is None else tuple(peer(i) for i in old),
    )


def rid(seconds: int = NOW_MS // 1000) -> bytes:
    return make_request_id(seconds, b"\x01\x02\x03", 7, next(_counter))


def entry(term: int, data: bytes = b"x", request_id: bytes | None = None) -> LogEntry:
    return LogEntry(request_id or rid(), EntryType.STATE, term, data)


def config_entry(term: int, payload: ConfigPayload) -> LogEntry:
    return LogEntry(rid(), EntryType.CONFIG, term, encode_config_payload(payload))


class RecordingMachine:
    """The executor's state machine here: remembers every applied entry, in order."""

    def __init__(self) -> None:
        self.applied: list[tuple[int, LogEntry]] = []
        self.last_applied = 0

    def apply(self, first_index: int, entries: Sequence[bytes], term: int) -> None:
        for offset, raw in enumerate(entries):
            self.applied.append((first_index + offset, LogEntry.from_bytes(raw)))
        self.last_applied = first_index + len(entries) - 1

    def restore(self, index: int, term: int, data: bytes) -> None:
        self.last_applied = index


class RecordingOutbox:
    """The executor's outbox here: keeps what was sent (tests read it from the Readies)."""

    def __init__(self) -> None:
        self.sent: list[object] = []

    def connect(self, peers: Sequence[Peer]) -> None:
        self.sent.append(("connect", tuple(peers)))

    def send_request(self, to: str, message: PeerRequest) -> None:
        self.sent.append((to, message))

    def send_reply(self, token: object, message: PeerResponse) -> None:
        self.sent.append((token, message))


@dataclass
class Node:
    """One core and its stores; ``run()`` carries out Readies with the production
    ``ReadyExecutor``."""

    core: RaftCore
    log: MemoryLogStore
    hard_state: MemoryHardStateStore
    snapshots: MemorySnapshotStore
    machine: RecordingMachine = field(default_factory=RecordingMachine)
    readies: list[Ready] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.executor = ReadyExecutor(
            log=self.log,
            hard_state=self.hard_state,
            snapshots=self.snapshots,
            ready_store=MemoryReadyStore(self.log, self.hard_state),
            machine=self.machine,
            outbox=RecordingOutbox(),
        )
        self.executor.core = self.core

    @property
    def applied(self) -> list[tuple[int, LogEntry]]:
        return self.machine.applied

    def run(self) -> Ready:
        """Carry out every pending Ready; returns them merged (messages, events, ...)."""
        merged: list[Ready] = []
        while self.core.has_ready():
            ready = self.core.ready()
            self.executor.execute(ready)
            merged.append(ready)
        self.readies.extend(merged)
        return merge(merged)

    # -- driving ----------------------------------------------------------------------------
    def tick(self, times: int = 1) -> Ready:
        for _ in range(times):
            self.core.tick()
        return self.run()

    def tick_until_role(self, role: Role, limit: int = 200) -> Ready:
        collected: list[Ready] = []
        for _ in range(limit):
            self.core.tick()
            collected.append(self.run())
            if self.core.role is role:
                return merge(collected)
        raise AssertionError(f"{self.core.peer_id} never became {role}")

    def receive(self, message: PeerRequest, token: object = "tok") -> Ready:
        self.core.step_request(token, message)
        return self.run()

    def answer(self, to: str, request: PeerRequest, response: PeerResponse) -> Ready:
        self.core.step_response(to, request, response)
        return self.run()


def merge(readies: list[Ready]) -> Ready:
    """One Ready holding everything of ``readies`` (for assertions over a whole step)."""
    if not readies:
        return Ready(None, None, (), None, (), (), None, ())
    soft = [r.soft_state for r in readies if r.soft_state is not None]
    hard = [r.hard_state for r in readies if r.hard_state is not None]
    appends = [r.append for r in readies if r.append is not None]
    committed = [r.committed for r in readies if r.committed is not None]
    return Ready(
        soft_state=soft[-1] if soft else None,
        hard_state=hard[-1] if hard else None,
        snapshot_ops=tuple(op for r in readies for op in r.snapshot_ops),
        append=appends[-1] if appends else None,
        messages_now=tuple(m for r in readies for m in r.messages_now),
        messages_after_persist=tuple(m for r in readies for m in r.messages_after_persist),
        committed=committed[-1] if committed else None,
        events=tuple(e for r in readies for e in r.events),
    )


def make_node(
    peer_id: str = "n1",
    members: ConfigPayload | None = None,
    *,
    entries: tuple[LogEntry, ...] = (),
    term: int = 0,
    voted_for: str | None = None,
    applied: int = 0,
    saved_config: ConfigPayload | None = None,
    config_index: int = 0,
    snapshot: tuple[int, int, bytes] | None = None,
    seed: int = 1,
    **overrides: Any,
) -> Node:
    """A peer whose durable state is given; ``first_election_extra_ticks`` defaults to 0."""
    seed_config = members or config("n1", "n2", "n3")
    log = MemoryLogStore()
    if entries:
        log.append(1, entries)
    snapshots = MemorySnapshotStore()
    if snapshot is not None:
        index, snap_term, data = snapshot
        snapshots.install(index, snap_term, data)
        log.compact(index, snap_term)
    hard_state = MemoryHardStateStore()
    hard_state.save(
        HardState(
            current_term=term,
            voted_for=voted_for,
            config=saved_config if saved_config is not None else seed_config,
            config_index=config_index,
            last_applied=applied,
        )
    )
    overrides.setdefault("first_election_extra_ticks", 0)
    settings = CoreConfig(peer_id, **overrides)
    core = RaftCore(
        settings,
        log,
        snapshots,
        hard_state.load(),
        seed_config=seed_config,
        rng=Random(seed),
        new_request_id=rid,
    )
    node = Node(core, log, hard_state, snapshots)
    node.run()
    return node


def requests(ready: Ready, kind: type[Any], *, now: bool | None = None) -> list[SendRequest]:
    """Requests of type ``kind`` in ``ready`` (``now``: only messages_now / only after)."""
    pools = []
    if now is not False:
        pools.append(ready.messages_now)
    if now is not True:
        pools.append(ready.messages_after_persist)
    return [
        m
        for pool in pools
        for m in pool
        if isinstance(m, SendRequest) and isinstance(m.message, kind)
    ]


def replies(ready: Ready, *, now: bool = False) -> list[SendReply]:
    pool = ready.messages_now if now else ready.messages_after_persist
    return [m for m in pool if isinstance(m, SendReply)]


def elect(node: Node, grant_from: tuple[str, ...] = ("n2",)) -> Ready:
    """Make ``node`` leader: let it time out, then grant it votes from ``grant_from``."""
    ready = node.tick_until_role(Role.CANDIDATE)
    votes = {m.to: m.message for m in requests(ready, RequestVote)}
    collected = [ready]
    for voter in grant_from:
        request = votes[voter]
        assert isinstance(request, RequestVote)
        collected.append(node.answer(voter, request, RequestVoteResponse(request.term, True)))
    assert node.core.role is Role.LEADER, node.core.role
    return merge(collected)


def ack(
    node: Node,
    send: SendRequest,
    *,
    success: bool = True,
    hint: int | None = None,
    marked: bool = True,
) -> Ready:
    """Answer an AppendEntries the node sent (a success carries the pipelining mark, as a
    raftlog follower's does, unless ``marked`` is False: a reference follower's)."""
    request = send.message
    assert isinstance(request, AppendEntries)
    answer = AppendEntriesResponse(request.term, success, hint, pipelines=success and marked)
    return node.answer(send.to, request, answer)


def with_term(message: AppendEntries, **changes: Any) -> AppendEntries:
    return replace(message, **changes)
