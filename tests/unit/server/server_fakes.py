"""Plain fakes for the server's narrow interfaces (no stubs of the whole peer, no casts)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from raftlog.consensus import Appended, ConfigProposeResult, NotLeader, ProposeResult, Refused
from raftlog.metrics import PeerMetrics
from raftlog.rpc.messages import (
    ConfigPayload,
    Peer,
    PeerRequest,
    RequestUpdateResponse,
    UpdateStatus,
)
from raftlog.server.replies import ServerReply, encode_reply
from raftlog.storage.base import SnapshotMeta


class RecordingReplies:
    """``Replies`` that keeps each typed answer and the bytes it encodes to."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes, bytes, ServerReply]] = []

    def reply(self, routing: bytes, msg_id: bytes, message: ServerReply) -> None:
        encode_reply(msg_id, message)  # must encode: a bad message fails here, as it would live
        self.sent.append((routing, msg_id, message))

    def update_done(self, routing: bytes, rid: bytes, index: int) -> None:
        self.reply(routing, rid, RequestUpdateResponse(rid, UpdateStatus.DONE, index=index))

    def updates_done(self, first: int, waiters: Sequence[tuple[bytes, bytes, bool]]) -> None:
        for offset, (routing, rid, _) in enumerate(waiters):
            self.update_done(routing, rid, first + offset)

    @property
    def messages(self) -> list[ServerReply]:
        return [m for _, _, m in self.sent]

    def frames(self) -> list[tuple[bytes, list[bytes]]]:
        """What went on the wire: (routing id, [id, frames...])."""
        return [(r, encode_reply(i, m)) for r, i, m in self.sent]


class EventRecorder:
    """``EventLog`` keeping (level, event, fields)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, object]]] = []

    def info(self, event: str, **fields: object) -> object:
        self.events.append(("info", event, fields))
        return None

    def warning(self, event: str, **fields: object) -> object:
        self.events.append(("warning", event, fields))
        return None

    def error(self, event: str, **fields: object) -> object:
        self.events.append(("error", event, fields))
        return None

    def names(self) -> list[str]:
        return [event for _, event, _ in self.events]


def peers(*ids: str) -> tuple[Peer, ...]:
    return tuple(Peer(i, f"tcp://127.0.0.1:{7000 + n}") for n, i in enumerate(ids))


@dataclass
class FakeCluster:
    """``ClusterView`` + ``Proposer`` + ``PeerRequestSink`` with scripted answers."""

    is_leader: bool = True
    leader_id: str | None = "n1"
    term: int = 3
    commit_index: int = 10
    config: ConfigPayload = field(default_factory=lambda: ConfigPayload(new=peers("n1", "n2")))
    config_known: bool = True
    results: list[ProposeResult] = field(default_factory=list)
    config_results: list[ConfigProposeResult] = field(default_factory=list)
    proposed: list[tuple[bytes, bytes]] = field(default_factory=list)
    batches: list[int] = field(default_factory=list)
    """The size of each ``propose_many`` batch."""
    stepped: list[tuple[object, PeerRequest]] = field(default_factory=list)
    heard: list[tuple[str, int]] = field(default_factory=list)

    def propose(
        self,
        request_id: bytes,
        data: bytes,
        now_ms: int,
        prepare: Callable[[bytes], bytes | Exception] | None = None,
        *,
        latest_ms: int | None = None,
    ) -> ProposeResult:
        """Like the core: the next scripted result; ``prepare`` runs for new appends only."""
        result = self.results.pop(0) if self.results else NotLeader(self.leader_id)
        if isinstance(result, Appended) and prepare is not None:
            prepared = prepare(data)
            if isinstance(prepared, Exception):
                return Refused(prepared)
            data = prepared
        self.proposed.append((request_id, data))
        return result

    def propose_many(
        self,
        requests: Sequence[tuple[bytes, bytes]],
        now_ms: int,
        prepare: Callable[[bytes], bytes | Exception] | None = None,
        *,
        latest_ms: int | None = None,
    ) -> list[ProposeResult]:
        """``propose`` of each, in order (the core's contract, which its own tests pin)."""
        self.batches.append(len(requests))
        return [
            self.propose(rid, data, now_ms, prepare, latest_ms=latest_ms) for rid, data in requests
        ]

    def propose_config(
        self, request_id: bytes, peers: object, now_ms: int, *, latest_ms: int | None = None
    ) -> ConfigProposeResult:
        return self.config_results.pop(0)

    def step_request(self, token: object, message: PeerRequest) -> None:
        self.stepped.append((token, message))

    def heard_from_leader(self, leader_id: str, term: int) -> None:
        self.heard.append((leader_id, term))


@dataclass
class FakeMachine:
    """``AppliedView`` + ``RequestHandler``."""

    last_applied: int = 0
    answers: dict[bytes, list[bytes]] = field(default_factory=dict)

    def handle_request(self, msg_type: bytes, args: Sequence[bytes]) -> list[bytes] | None:
        return self.answers.get(msg_type)


@dataclass
class FakeLogBounds:
    first_index: int = 1
    last_index: int = 12
    oldest: int | None = None

    def oldest_request_index(self) -> int | None:
        return self.oldest


@dataclass
class FakeSnapshots:
    installed: SnapshotMeta | None = None

    def meta(self) -> SnapshotMeta | None:
        return self.installed


def metrics() -> PeerMetrics:
    return PeerMetrics()
