"""Simulated clients that behave like the reference client (docs/protocol.md §13, last paragraph).

Each client has one operation at a time and retries it with the *same* request id until it
gets a final answer -- ``Duplicate``/``Appended`` for an index the answering leader has
applied -- following "not leader" hints and falling back to a random peer. Acknowledged
operations are recorded so the end of a run can check that none was lost or duplicated.
"""

from __future__ import annotations

from dataclasses import dataclass
from random import Random

from raftlog.consensus import (
    Appended,
    ConfigAccepted,
    ConfigBusy,
    ConfigDone,
    ConfigExpired,
    ConfigNotLeader,
    ConfigRejected,
    Duplicate,
    Expired,
    NotLeader,
)
from raftlog.ids import make_request_id
from sim.cluster import SimCluster, peers_of

_CLIENT_TIMEOUT_TICKS = 50


@dataclass
class Operation:
    request_id: bytes
    data: bytes
    index: int | None = None
    since: int = 0
    """Tick of the last progress; a client that waits too long tries another peer."""


class Client:
    def __init__(self, number: int, target: str) -> None:
        self.number = number
        self.target = target
        self.counter = 0
        self.op: Operation | None = None
        self.acked: list[tuple[bytes, int]] = []
        self.issued = 0


class Workload:
    def __init__(
        self, cluster: SimCluster, rng: Random, clients: int, max_ops: int, rate: float
    ) -> None:
        self.cluster = cluster
        self.rng = rng
        self.rate = rate
        self.max_ops = max_ops
        ids = sorted(cluster.nodes)
        self.clients = [Client(n, rng.choice(ids)) for n in range(clients)]
        self.expired = 0
        self.config_results: dict[str, int] = {}

    def act(self, allow_new: bool) -> None:
        for client in self.clients:
            if self.rng.random() >= self.rate:
                continue
            if client.op is None:
                if not allow_new or client.issued >= self.max_ops:
                    continue
                client.issued += 1
                client.counter += 1
                rid = make_request_id(
                    self.cluster.now_ms // 1000, b"\xc1\x1e\x00", client.number, client.counter
                )
                data = f"c{client.number}-{client.counter}".encode()
                client.op = Operation(rid, data, since=self.cluster.tick)
            if self.cluster.tick - client.op.since > _CLIENT_TIMEOUT_TICKS:
                # The reference client's 500 ms response timeout: same request, other peer.
                client.op.since = self.cluster.tick
                client.target = self.rng.choice(sorted(self.cluster.nodes))
            self._send(client, client.op)

    def _send(self, client: Client, op: Operation) -> None:
        node = self.cluster.nodes[client.target]
        core = node.core
        if core is None:
            client.target = self.rng.choice(sorted(self.cluster.nodes))
            return
        result = core.propose(op.request_id, op.data, self.cluster.now_ms)
        if isinstance(result, NotLeader):
            op.since = self.cluster.tick
            hint = result.leader_id
            client.target = (
                hint if hint is not None else self.rng.choice(sorted(self.cluster.nodes))
            )
        elif isinstance(result, Expired):
            self.expired += 1
            client.op = None
        elif isinstance(result, Appended | Duplicate):
            op.index = result.index
            if node.sm.index >= result.index:  # the leader's final "[true, index]"
                client.acked.append((op.request_id, result.index))
                client.op = None

    @property
    def outstanding(self) -> int:
        return sum(1 for client in self.clients if client.op is not None)

    def acked(self) -> list[tuple[bytes, int]]:
        return [ack for client in self.clients for ack in client.acked]

    # -- membership changes -----------------------------------------------------------------
    def change_membership(self) -> None:
        """Ask the current leader to add or remove one peer of the pool."""
        leader = self.cluster.leader()
        if leader is None or leader.core is None:
            return
        core = leader.core
        members = [peer.id for peer in core.config.new]
        pool = sorted(self.cluster.nodes)
        outside = [p for p in pool if p not in members]
        if outside and (len(members) < 3 or self.rng.random() < 0.5):
            members.append(self.rng.choice(outside))
        elif len(members) > 1:
            members.remove(self.rng.choice(members))
        else:
            return
        rid = make_request_id(
            self.cluster.now_ms // 1000, b"\xc0\x4f\x1e", 0, self.rng.randrange(1 << 24)
        )
        wire = [[peer.id, peer.url] for peer in peers_of(members)]
        result = core.propose_config(rid, wire, self.cluster.now_ms)
        name = type(result).__name__
        self.config_results[name] = self.config_results.get(name, 0) + 1
        assert isinstance(
            result,
            ConfigAccepted
            | ConfigBusy
            | ConfigDone
            | ConfigExpired
            | ConfigNotLeader
            | ConfigRejected,
        )
        self.cluster.trace.add("config", leader.id, members, name)
