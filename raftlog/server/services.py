"""Wiring: the peer's services, each given only the narrow interfaces it needs, and the
handler table that routes every message type to one of them.

Why a module of its own: ``PeerNode`` owns sockets, stores and the loop; which service
answers which message type, and what each may touch, is read here in one place -- the table
below is the whole of the server's RPC surface.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace

import zmq

from raftlog.cluster_clock import ClusterClock, wall_ms
from raftlog.config import PeerSettings
from raftlog.consensus import Appended, CoreConfig, Duplicate, RaftCore
from raftlog.metrics import PeerMetrics
from raftlog.options import RaftOptions
from raftlog.registry import ROWS
from raftlog.rpc.clock import ClockReading, encode_clock_reading
from raftlog.rpc.messages import (
    ClientDispatch,
    ClientDispatchResponse,
    EntriesStatus,
    RequestEntries,
    RequestEntriesResponse,
)
from raftlog.server.answer_backlog import AnswerBacklog
from raftlog.server.client_service import ClientService
from raftlog.server.clock_watch import ClockWatch
from raftlog.server.compaction import CompactionPolicy
from raftlog.server.consistent_reads import ConsistentReads
from raftlog.server.disk_guard import DiskGuard
from raftlog.server.dispatch import Dispatcher, Handler, HandlerTable, QueueFlushes, route
from raftlog.server.entries_service import EntriesLimits, EntriesService
from raftlog.server.info_service import InfoService
from raftlog.server.interfaces import EventLog, LeaderView
from raftlog.server.leadership_service import LeadershipService
from raftlog.server.peer_service import PeerService
from raftlog.server.peers import PeerChannels
from raftlog.server.replies import ReplySender
from raftlog.statemachine.composite import CompositeStateMachine
from raftlog.storage.rocks import RocksLogStore
from raftlog.storage.snapshot import FileSnapshotStore
from raftlog.topics.clock import TopicClock
from raftlog.topics.gate import TopicGate
from raftlog.topics.groups.deadletter import DeadLetters
from raftlog.topics.machine import TopicStateMachine


def core_config(settings: PeerSettings) -> CoreConfig:
    """The core's settings from the peer's options (milliseconds -> ticks)."""
    opts = settings.options
    return CoreConfig.from_millis(
        settings.id,
        tick_ms=opts.tick_ms,
        election_timeout_min=opts.election_timeout_min,
        election_timeout_max=opts.election_timeout_max,
        first_election_extra=opts.first_election_extra,
        rpc_timeout=opts.rpc_timeout,
        heartbeat_interval=opts.append_entries_heartbeat_interval,
        append_entries_rpc_timeout_min=opts.append_entries_rpc_timeout_min,
        append_entries_rpc_timeout_max=opts.append_entries_rpc_timeout_max,
        peer_msg_data_size=opts.peer_msg_data_size,
        request_id_ttl=opts.request_id_ttl,
        request_id_ttl_accept_margin=opts.request_id_ttl_accept_margin,
        prevent_spiral_elections=opts.prevent_spiral_elections,
        replication_pipeline=opts.replication_pipeline,
    )


@dataclass(frozen=True, slots=True)
class Services:
    """Everything that answers the ROUTER, built once per peer."""

    replies: ReplySender
    peers: PeerService
    clients: ClientService
    entries: EntriesService
    info: InfoService
    compaction: CompactionPolicy
    dispatcher: Dispatcher
    topic_clock: TopicClock
    clock_watch: ClockWatch


def entries_handler(
    entries: EntriesService,
    leader: LeaderView,
    machine: CompositeStateMachine,
    reads: ConsistentReads,
    replies: ReplySender,
) -> Callable[[bytes, bytes, RequestEntries], None]:
    """RequestEntries with what the stream service needs to know at that moment; a new
    stream that asks for a consistency level (issue #29) starts once it is met."""

    def handle(routing: bytes, msg_id: bytes, message: RequestEntries) -> None:
        def serve() -> None:
            entries.handle(
                routing,
                msg_id,
                message,
                leader=leader.is_leader,
                leader_id=leader.leader_id,
                applied=machine.last_applied,
                now=time.monotonic(),
            )

        def refuse(leader_id: str | None) -> None:
            answer = RequestEntriesResponse(EntriesStatus.NOT_LEADER, leader_id=leader_id)
            replies.reply(routing, msg_id, answer)

        gated = message.min_index or message.linearizable
        if not gated or message.count == 0 or entries.is_open((routing, msg_id)):
            serve()
        elif not leader.is_leader and not message.any_peer:
            refuse(leader.leader_id)  # a follower serves any_peer streams only
        else:
            reads.gate(min_index=message.min_index, linearizable=message.linearizable,
                       serve=serve, refuse=refuse)

    return handle


def clock_handler(
    replies: ReplySender, clock: ClusterClock
) -> Callable[[bytes, bytes, ClientDispatch], None]:
    """``CK`` (``raftlog.rpc.clock``): this peer's wall clock and cluster clock."""

    def handle(routing: bytes, msg_id: bytes, message: ClientDispatch) -> None:
        reading = ClockReading(wall_ms(), clock.peek())
        replies.reply(routing, msg_id, ClientDispatchResponse(tuple(encode_clock_reading(reading))))

    return handle


def own_proposer(
    core: RaftCore, gate: TopicGate, clock: ClusterClock
) -> Callable[[bytes, bytes], int | None]:
    """The leader appending a topic entry of its own through the gate (the dead-letter
    mover, issue #27): its index, or None when refused or not leading."""

    def propose(request_id: bytes, data: bytes) -> int | None:
        result = core.propose(request_id, data, clock.now(), gate.prepare)
        return result.index if isinstance(result, Appended | Duplicate) else None

    return propose


def handler_table(targets: Mapping[str, object]) -> HandlerTable:
    """The server's RPC surface, derived from the registry (``raftlog.registry``): each
    row's ``"<service>.<method>"`` looked up among the wired ``targets``, behind a check that
    the message is of the row's class."""
    table: dict[bytes, Handler] = {}
    for row in ROWS:
        service, _, method = row.handler.partition(".")
        table[row.code] = route(row.message, getattr(targets[service], method))
    return table


def queue_flushes(targets: Mapping[str, object]) -> QueueFlushes:
    """What handles each queueing type's queue (``MessageRow.flush``), from the registry."""
    flushes: dict[bytes, Callable[[], None]] = {}
    for row in ROWS:
        if row.flush is not None:
            service, _, method = row.flush.partition(".")
            flushes[row.code] = getattr(targets[service], method)
    return flushes


def build_services(
    *,
    ident: bytes,
    pub_url: str,
    options: RaftOptions,
    router: zmq.Socket[bytes],
    core: RaftCore,
    store: RocksLogStore,
    snapshots: FileSnapshotStore,
    machine: CompositeStateMachine,
    topics: TopicStateMachine,
    metrics: PeerMetrics,
    log: EventLog,
    disk: DiskGuard | None = None,
    channels: PeerChannels | None = None,
    answers: AnswerBacklog | None = None,
) -> Services:
    """Build the services over the peer's core, stores and ROUTER."""
    replies = ReplySender(router, metrics, answers)
    peers = PeerService(core, core, replies, metrics, log,
                        max_entry_data=options.max_log_entry_data_size)
    clock = ClusterClock(lambda: topics.last_time)  # every time-based decision (issue #24)
    gate = TopicGate(
        topics,
        auto_create=options.topic_auto_create,
        max_data=options.max_log_entry_data_size,
        max_records=options.max_records_per_entry,
        now_ms=clock.now,
        disk=disk,
    )
    clients = ClientService(
        core,
        replies,
        machine=machine,
        gate=gate,
        metrics=metrics,
        log=log,
        max_data=options.max_log_entry_data_size,
        now_ms=clock.now,
        latest_ms=clock.latest_ms,
        times=clock.now_and_latest,
    )
    entries = EntriesService(
        store,
        snapshots,
        replies,
        EntriesLimits(
            pipelines=options.request_entries_pipelines,
            snapshot_pipelines=options.request_entries_snapshot_pipelines,
            entry_size_limit_pipeline=options.request_entries_entry_size_limit_pipeline,
            high_watermark=options.request_entries_high_watermark,
            ttl_ms=options.request_entries_ttl,
        ),
    )
    compaction = CompactionPolicy(
        store,
        snapshots,
        machine,
        core.term_at,
        log,
        threshold=options.log_compaction_threshold,
        request_id_ttl=options.request_id_ttl,
        request_id_cache_max=options.request_id_cache_max,
        metrics=metrics,
    )
    compaction.add_limit(topics.compaction_limit)  # never past a retained record (issue #11)
    info = InfoService(
        cluster=core,
        log_bounds=store,
        snapshots=snapshots,
        machine=machine,
        handler=machine,
        compactor=compaction,
        replies=replies,
        metrics=metrics,
        log=log,
        pub_url=pub_url,
        topic_totals=topics.counters.get,  # which topics got records: parked TR reads
        unread_over_limit=replies.unread_over_limit,
        reads=ConsistentReads(
            core, machine, replies, ask=None if channels is None else channels.ask
        ),
    )
    leadership = LeadershipService(core, replies, log)
    targets = {
        "peers": peers,
        "clients": clients,
        "info": info,
        "leadership": leadership,
        "entries": SimpleNamespace(
            request_entries=entries_handler(entries, core, machine, info.reads, replies)
        ),
        "reads": info.reads,
        "clock": SimpleNamespace(reading=clock_handler(replies, clock)),
    }
    handlers = handler_table(targets)
    fallback = route(ClientDispatch, info.state_machine_request)
    dispatcher = Dispatcher(ident, handlers, fallback, metrics, log, queues=queue_flushes(targets))
    dead_letters = DeadLetters(topics, own_proposer(core, gate, clock), lambda: core.is_leader,
                               max_data=options.max_log_entry_data_size)
    topic_clock = TopicClock(core, topics, clock, [dead_letters.on_timer])
    watch = ClockWatch(clock, metrics, log)
    return Services(
        replies, peers, clients, entries, info, compaction, dispatcher, topic_clock, watch
    )
