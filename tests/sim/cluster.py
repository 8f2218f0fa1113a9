"""Simulated peers: a ``RaftCore`` over in-memory stores, a transport shim and a driver loop.

``SimCluster.step()`` is one tick: every live node runs the peer's own loop step
(``raftlog.server.loop_step.loop_step``) with this simulated network as its inputs and the
tick counter as its clock -- the messages due are stepped in, the core ticks once, then the
production ``ReadyExecutor`` (``raftlog.server.ready_executor``) carries out its Readies,
injected with in-memory stores, this simulated network, crash points and ``SimWrites`` -- the
simulated storage thread: a Ready's writes complete some ticks later (in order, as one WAL
does), the node keeps taking Readies meanwhile, and a crash loses what is not written yet.
So the seeds check the order the peers run, not a copy of it: the simulator never orders
the phases itself (a structure test checks it). Crash points between the
executor's steps model a process dying in the middle of a Ready; ``crash``/``restart``
rebuild a core from the durable stores only.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from random import Random

from raftlog.consensus import LogAppend, RaftCore, Ready, Role, SnapshotInstall
from raftlog.consensus.settings import CoreConfig
from raftlog.entry import LogEntry
from raftlog.ids import make_request_id
from raftlog.rpc.messages import (
    AppendEntriesResponse,
    ConfigPayload,
    Peer,
    PeerRequest,
    PeerResponse,
)
from raftlog.server.loop_step import loop_step
from raftlog.server.ready_executor import ReadyExecutor
from raftlog.storage.base import HardState
from raftlog.storage.memory import MemoryHardStateStore, MemoryLogStore
from raftlog.storage.memory_snapshot import MemorySnapshotStore
from raftlog.storage.ready_store import MemoryReadyStore
from sim.network import LinkRule, SimNetwork
from sim.tracing import Trace

SIM_EPOCH_MS = 1_700_000_000_000
TICK_MS = 10
_PENDING_LIMIT = 4096


def chain(digest: bytes, index: int, entry: LogEntry) -> bytes:
    """The applied-sequence hash chain shared by state machines and the invariant checker."""
    return chain_raw(digest, index, entry.to_bytes())


def chain_raw(digest: bytes, index: int, raw: bytes) -> bytes:
    """``chain`` over an entry's serialized bytes (what the executor applies)."""
    h = hashlib.blake2b(digest, digest_size=16)
    h.update(index.to_bytes(8, "little"))
    h.update(raw)
    return h.digest()


def peer_url(peer_id: str) -> str:
    return f"tcp://127.0.0.{int(peer_id[1:]) + 1}:5000"


def peers_of(ids: list[str]) -> tuple[Peer, ...]:
    return tuple(Peer(i, peer_url(i)) for i in ids)


class RecordingStateMachine:
    """Durable (persisted together with ``last_applied``) hash chain of what was applied.

    Keeps the digest of every index since its base so that it can produce the snapshot of any
    applied index (compaction stops at the prune index, below ``index``)."""

    def __init__(self) -> None:
        self.index = 0
        self.digest = b""
        self.violations: list[str] = []
        self.base = 0
        self.digests: list[bytes] = [b""]  # digests[i - base] = chain through index i

    @property
    def last_applied(self) -> int:
        return self.index

    def apply(self, first_index: int, entries: Sequence[bytes], term: int) -> None:
        """The production executor's call: serialized committed entries in order."""
        for offset, raw in enumerate(entries):
            index = first_index + offset
            if index != self.index + 1:
                self.violations.append(f"applied {index} after {self.index}")
            self.digest = chain_raw(self.digest, index, raw)
            self.digests.append(self.digest)
            self.index = index

    def snapshot(self, index: int) -> bytes:
        """The state as it was right after applying ``index`` (base <= index <= self.index)."""
        return json.dumps({"i": index, "d": self.digests[index - self.base].hex()}).encode()

    def restore(self, index: int, term: int, data: bytes) -> None:
        state = json.loads(data)
        if state["i"] != index:
            self.violations.append(f"snapshot of {state['i']} installed as {index}")
        self.index = self.base = state["i"]
        self.digest = bytes.fromhex(state["d"])
        self.digests = [self.digest]


@dataclass
class Observer:
    """Hooks the invariant checker installs (kept as callables to avoid an import cycle)."""

    on_ready: Callable[[SimNode, Ready], None]
    on_restart: Callable[[SimNode], None]


@dataclass(frozen=True, slots=True)
class _SimToken:
    """Where the answer to an inbound simulated request goes."""

    src: str
    incarnation: int
    msgid: int


class _SimOutbox:
    """The executor's ``Outbox`` for one node: the simulated network."""

    def __init__(self, cluster: SimCluster, node: SimNode) -> None:
        self._cluster = cluster
        self._node = node

    def connect(self, peers: Sequence[Peer]) -> None:
        """Nothing to connect: the simulated network reaches every node by id."""

    def send_request(self, to: str, message: PeerRequest) -> None:
        self._cluster.send_request(self._node, to, message)

    def send_reply(self, token: object, message: PeerResponse) -> None:
        self._cluster.send_reply(self._node, token, message)


class _SimInputs:
    """The loop step's inputs for one node (``StepInputs``): what the network delivers to it
    this tick and the ticks that passed. No timers, nothing streams."""

    def __init__(self, cluster: SimCluster, node: SimNode) -> None:
        self._cluster = cluster
        self._node = node
        self.inbox: list[tuple[str, object]] = []
        self.ticks = 0

    def drain_inputs(self) -> None:
        inbox, self.inbox = self.inbox, []
        for src, payload in inbox:
            self._cluster.deliver(src, self._node.id, payload)

    def ticks_due(self, now: float) -> int:
        ticks, self.ticks = self.ticks, 0
        return ticks

    def on_ticked(self, now: float) -> None:
        """The simulated peer runs no timers."""

    def after_readies(self, now: float) -> None:
        """Nothing streams in the simulator."""


class SimWrites:
    """The simulated storage thread (``DurableWrites``): each write completes ``delay`` ticks
    after it was submitted (the node's ``persist_delay``, else random up to the cluster's
    ``max_persist_delay``), never before an earlier one; a zero delay with nothing queued is
    written at once. A crash drops the queue: those writes never happened.

    Applied progress is saved at once: the simulated state machine is durable together with
    ``last_applied`` (a peer's may lag it and re-apply, which this model would call a
    violation), and a queued hard state never takes it back (as the storage thread stages the
    highest applied index into each batch)."""

    def __init__(self, cluster: SimCluster, node: SimNode) -> None:
        self._cluster = cluster
        self._node = node
        self._store = MemoryReadyStore(node.log, node.hard_state)
        self._queue: deque[tuple[int, int, HardState | None, LogAppend | None]] = deque()
        self._submitted = 0
        self._durable = 0
        self._applied = 0

    @property
    def submitted(self) -> int:
        return self._submitted

    @property
    def in_flight(self) -> bool:
        return bool(self._queue)

    def submit(self, hard_state: HardState | None, append: LogAppend | None) -> int:
        self._submitted += 1
        cluster, node = self._cluster, self._node
        if node.persist_delay is not None:
            delay = node.persist_delay
        elif cluster.max_persist_delay:
            delay = cluster.rng.randint(0, cluster.max_persist_delay)
        else:
            delay = 0
        due = cluster.tick + delay
        if self._queue:
            due = max(due, self._queue[-1][0])
        self._queue.append((due, self._submitted, hard_state, append))
        if delay == 0:
            self.durable()
        return self._submitted

    def durable(self) -> int:
        while self._queue and self._queue[0][0] <= self._cluster.tick:
            self._write_next()
        return self._durable

    def wait(self) -> None:
        while self._queue:
            self._write_next()

    def record_applied(self, index: int) -> None:
        self._applied = max(self._applied, index)
        # never beyond the durable log (applied entries are durable unless the disk lied)
        self._node.hard_state.save_applied(min(self._applied, self._node.log.last_index))

    def flush_applied(self) -> None:
        """Nothing to do: ``record_applied`` saved it at once."""

    def crash(self) -> None:
        """The writes not done yet never happen. Their tickets count as settled: nothing of
        this incarnation waits for them any more (``ReadyExecutor.forget``), and the next
        one's first write must not queue behind them -- a real restart starts a new thread."""
        self._queue.clear()
        self._durable = self._submitted

    def _write_next(self) -> None:
        _, ticket, hard_state, append = self._queue.popleft()
        if append is not None and append.first_index <= self._node.log.last_index:
            self._cluster.counters["truncation"] += 1
        if hard_state is not None and hard_state.last_applied < self._applied:
            hard_state = replace(hard_state, last_applied=self._applied)
        self._store.persist(
            hard_state,
            append.first_index if append is not None else 0,
            append.entries if append is not None else None,
        )
        self._durable = ticket


class SimNode:
    def __init__(self, peer_id: str, seed: ConfigPayload, config: CoreConfig) -> None:
        self.id = peer_id
        self.seed = seed
        self.config = config
        self.log = MemoryLogStore()
        self.hard_state = MemoryHardStateStore()
        self.snapshots = MemorySnapshotStore()
        self.sm = RecordingStateMachine()
        self.core: RaftCore | None = None
        self.incarnation = 0
        self.pending: dict[int, tuple[str, PeerRequest]] = {}
        self.next_msgid = 0
        self.rid_counter = 0
        self.persist_delay: int | None = None
        """Fixed write delay of this node (scripts); None: the cluster's random delay."""
        self.writes: SimWrites
        """The simulated storage thread (set by ``SimCluster``)."""
        self.executor: ReadyExecutor
        """The production Ready executor over this node's stores (set by ``SimCluster``)."""
        self.inputs: _SimInputs
        """What the loop step steps into this node (set by ``SimCluster``)."""

    @property
    def alive(self) -> bool:
        return self.core is not None


class SimCluster:
    def __init__(
        self,
        ids: list[str],
        members: list[str],
        rng: Random,
        link: LinkRule,
        trace: Trace,
        make_config: Callable[[str], CoreConfig],
    ) -> None:
        self.rng = rng
        self.trace = trace
        self.tick = 0
        self.network = SimNetwork(Random(rng.random()), link)
        seed = ConfigPayload(new=peers_of(members))
        self.nodes = {i: SimNode(i, seed, make_config(i)) for i in ids}
        for node in self.nodes.values():
            node.writes = SimWrites(self, node)
            node.executor = self._executor_of(node)
            node.inputs = _SimInputs(self, node)
        self.crash_in_ready = 0.0
        self.restart_after = (1, 60)
        self.max_persist_delay = 0
        self.observer: Observer | None = None
        self.restart_at: dict[str, int] = {}
        self.counters: Counter[str] = Counter()
        """What happened during the run (crashes, installs, truncations, ...)."""
        self.paused: dict[str, tuple[int, list[tuple[str, object]]]] = {}
        """Stopped peers (SIGSTOP): the tick they stopped at and what arrived meanwhile."""
        self.unmarked: set[str] = set()
        """Peers whose AppendEntries answers lose the pipelining mark, as a reference peer's
        never carry it (the chaos action ``swap_kind`` toggles one, as if the peer at that
        address were replaced by the other implementation)."""

    # -- time -----------------------------------------------------------------------------
    @property
    def now_ms(self) -> int:
        return SIM_EPOCH_MS + self.tick * TICK_MS

    def live(self) -> list[SimNode]:
        return [node for node in self.nodes.values() if node.core is not None]

    def start_all(self) -> None:
        for node in self.nodes.values():
            self.restart(node.id)

    def step(self) -> None:
        self.tick += 1
        self.trace.tick = self.tick
        for peer_id, at in list(self.restart_at.items()):
            if at <= self.tick:
                del self.restart_at[peer_id]
                self.restart(peer_id)
        inboxes: dict[str, list[tuple[str, object]]] = {}
        for src, dst, payload in self.network.due(self.tick):
            if dst in self.paused:
                self.paused[dst][1].append((src, payload))  # queued in its sockets
                continue
            inboxes.setdefault(dst, []).append((src, payload))
        for node in self.nodes.values():
            if node.id not in self.paused:
                self.run_step(node, inboxes.get(node.id, ()), ticks=1)

    def run_step(self, node: SimNode, inbox: Sequence[tuple[str, object]], ticks: int) -> None:
        """One pass of the peer's loop (``loop_step``) for ``node``: ``inbox`` stepped in,
        ``ticks`` of time, then its Readies; a dead node runs nothing (what reached it is
        lost, as on a real network)."""
        if node.core is None:
            return
        node.inputs.inbox.extend(inbox)
        node.inputs.ticks = ticks
        loop_step(node.core, node.executor, node.inputs, self._clock, hold_while_writing=False)

    def _clock(self) -> float:
        """The loop step's clock: simulated seconds."""
        return self.tick * TICK_MS / 1000.0

    def _executor_of(self, node: SimNode) -> ReadyExecutor:
        """The production executor, injected with this node's in-memory stores, the
        simulated network and the crash points."""
        return ReadyExecutor(
            log=node.log,
            hard_state=node.hard_state,
            snapshots=node.snapshots,
            ready_store=MemoryReadyStore(node.log, node.hard_state),
            machine=node.sm,
            outbox=_SimOutbox(self, node),
            writes=node.writes,
            react=lambda ready: self._react(node, ready),
            crash_point=lambda where: self._crash_here(node, where),
            inspect=lambda ready: self._inspect(node, ready),
        )

    # -- transport shim -------------------------------------------------------------------
    def send_request(self, node: SimNode, to: str, message: PeerRequest) -> None:
        node.next_msgid += 1
        msgid = node.next_msgid
        node.pending[msgid] = (to, message)
        if len(node.pending) > _PENDING_LIMIT:
            for old in list(node.pending)[: _PENDING_LIMIT // 2]:
                del node.pending[old]
        payload: tuple[object, ...] = ("req", node.incarnation, msgid, message)
        self.network.send(self.tick, node.id, to, payload)

    def send_reply(self, node: SimNode, token: object, message: PeerResponse) -> None:
        if not isinstance(token, _SimToken):
            raise TypeError(f"foreign reply token {token!r}")
        unmark = isinstance(message, AppendEntriesResponse) and message.pipelines
        if unmark and node.id in self.unmarked:
            message = replace(message, pipelines=False)
            self.counters["unmarked_answer"] += 1
        payload = ("resp", token.incarnation, token.msgid, message)
        self.network.send(self.tick, node.id, token.src, payload)

    def deliver(self, src: str, dst: str, payload: object) -> None:
        node = self.nodes[dst]
        core = node.core
        if core is None:
            return
        kind, incarnation, msgid, message = payload  # type: ignore[misc]
        if kind == "req":
            core.step_request(_SimToken(src, incarnation, msgid), message)
            return
        if incarnation != node.incarnation:
            return  # an answer to a previous life of this node
        sent = node.pending.get(msgid)  # kept: duplicated answers reach the core too
        if sent is None or sent[0] != src:
            return
        core.step_response(src, sent[1], message)

    # -- the driver loop ------------------------------------------------------------------
    def _crash_here(self, node: SimNode, where: str) -> bool:
        if where == "while_writing" and not node.writes.in_flight:
            return False  # only a node with a write in flight can die in the middle of it
        if self.crash_in_ready and self.rng.random() < self.crash_in_ready:
            self.crash(node.id, where)
            self.restart_at[node.id] = self.tick + self.rng.randint(*self.restart_after)
            return True
        return False

    def drain(self, node: SimNode) -> None:
        """Carry out the node's Readies: a loop step with no input and no time (the
        production ``ReadyExecutor`` completes those whose writes are durable by now, then
        dispatches every pending one). With ``max_persist_delay`` a write completes some
        ticks later (a slow fsync on the storage thread): ``messages_now`` are out already,
        the node keeps taking Readies and inputs, and a crash in between loses the write."""
        self.run_step(node, (), ticks=0)

    def _inspect(self, node: SimNode, ready: Ready) -> None:
        """Each Ready the executor takes, before it is carried out: the invariant checker."""
        if self.observer is not None:
            self.observer.on_ready(node, ready)
        if ready.soft_state is not None:
            self.trace.add("soft", node.id, ready.soft_state)

    def _react(self, node: SimNode, ready: Ready) -> None:
        for op in ready.snapshot_ops:
            if isinstance(op, SnapshotInstall):
                self.trace.add("install", node.id, op.index, op.term)
                self.counters["snapshot_install"] += 1
        for event in ready.events:
            self.trace.add("event", node.id, event)
            self.counters[type(event).__name__] += 1

    # -- faults and maintenance -------------------------------------------------------------
    def pause(self, peer_id: str) -> None:
        """SIGSTOP: the peer neither ticks, reads nor writes; messages to it queue up."""
        self.trace.add("pause", peer_id)
        self.paused.setdefault(peer_id, (self.tick, []))

    def resume(self, peer_id: str) -> None:
        """SIGCONT: the peer's loop step wakes -- it drains everything that queued up, then
        ticks once for the time that passed (capped at ``MAX_TICK_BACKLOG``), then carries
        out its Readies."""
        paused_at, queued = self.paused.pop(peer_id)
        self.trace.add("resume", peer_id, self.tick - paused_at)
        self.run_step(self.nodes[peer_id], queued, ticks=self.tick - paused_at)

    def crash(self, peer_id: str, why: str = "crash") -> None:
        node = self.nodes[peer_id]
        if node.core is None:
            return
        self.trace.add("crash", peer_id, why)
        self.counters["crash_" + why] += 1
        node.core = node.executor.core = None
        node.log.crash()
        node.hard_state.crash()
        node.snapshots.crash()
        node.pending = {}
        node.writes.crash()
        node.executor.forget()
        node.incarnation += 1

    def restart(self, peer_id: str) -> None:
        node = self.nodes[peer_id]
        if node.core is not None:
            return
        self.restart_at.pop(peer_id, None)
        self.trace.add("restart", peer_id, node.incarnation)

        def new_request_id() -> bytes:
            node.rid_counter += 1
            machine = int(peer_id[1:]).to_bytes(3, "big")
            return make_request_id(
                self.now_ms // 1000, machine, 0x7000 + node.incarnation, node.rid_counter
            )

        node.core = node.executor.core = RaftCore(
            node.config,
            node.log,
            node.snapshots,
            node.hard_state.load(),
            seed_config=node.seed,
            rng=Random(self.rng.random()),
            new_request_id=new_request_id,
        )
        if self.observer is not None:
            self.observer.on_restart(node)
        self.drain(node)

    def compact(self, peer_id: str, ttl_ms: int | None) -> bool:
        """Snapshot the state machine and compact the log, no further than the prune index
        (docs/protocol.md §12.7): every request id a snapshot covers must already be expired, or a
        peer that installs it would no longer recognise a retry of it."""
        node = self.nodes[peer_id]
        core = node.core
        if core is None:
            return False
        node.writes.wait()  # the peer's store waits for its storage thread first (before_write)
        node.log.prune_expired_request_ids(self.now_ms, ttl_ms)
        oldest = node.log.oldest_request_index()
        index = node.sm.index if oldest is None else min(node.sm.index, oldest - 1)
        if index <= max(node.log.snapshot_index, node.sm.base):
            return False
        term = core.term_at(index)
        if term is None:
            return False
        node.snapshots.install(index, term, node.sm.snapshot(index))
        node.log.compact(index, term)
        self.trace.add("compact", peer_id, index, term)
        self.counters["compaction"] += 1
        return True

    def leader(self) -> SimNode | None:
        """The live leader with the highest term, if any."""
        best: SimNode | None = None
        for node in self.live():
            assert node.core is not None
            if node.core.role is Role.LEADER and (
                best is None or best.core is None or node.core.term > best.core.term
            ):
                best = node
        return best
