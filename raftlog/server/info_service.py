"""Read-only queries any peer answers, and the on-demand compaction of its own log.

RequestConfig (§10.1), RequestLogInfo (§10.2), RequestBroadcastStateUrl (§11.1), ``AC``
compact (``raftlog.rpc.admin``), and every other message type the state machine handles
itself (§10.6). Nothing here changes consensus state; the answers come from the narrow
views the peer hands in. A ``TR`` read with a ``wait`` that finds nothing is held in
:class:`~raftlog.server.parked_reads.ParkedReads` until a record comes (``on_applied``) or
the wait ends (``sweep``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from raftlog.metrics import PeerMetrics
from raftlog.rpc.admin import CompactResponse
from raftlog.rpc.messages import (
    ClientDispatch,
    ClientDispatchResponse,
    RequestBroadcastStateUrl,
    RequestBroadcastStateUrlResponse,
    RequestConfig,
    RequestConfigResponse,
    RequestLogInfo,
    RequestLogInfoResponse,
)
from raftlog.server.consistent_reads import ConsistentReads
from raftlog.server.continued_reads import ContinuedReads
from raftlog.server.interfaces import (
    AppliedView,
    ClusterView,
    Compactor,
    EventLog,
    LogBounds,
    Replies,
    RequestHandler,
    SnapshotView,
)
from raftlog.server.parked_reads import ParkedReads, TotalsOf, parkable
from raftlog.topics.wire import TYPE_READ
from raftlog.topics.wire_reads import encode_not_served, read_level

LOG_SAMPLE: Final = 100
"""Log one in this many unhandled message types (the counter keeps them all)."""


class InfoService:
    """Answers queries from read-only views; forwards unknown types to the state machine."""

    def __init__(
        self,
        *,
        cluster: ClusterView,
        log_bounds: LogBounds,
        snapshots: SnapshotView,
        machine: AppliedView,
        handler: RequestHandler,
        compactor: Compactor,
        replies: Replies,
        metrics: PeerMetrics,
        log: EventLog,
        pub_url: str,
        topic_totals: TotalsOf | None = None,
        reads: ConsistentReads,
        unread_over_limit: Callable[[bytes], bool] | None = None,
    ) -> None:
        self._cluster = cluster
        self._log_bounds = log_bounds
        self._snapshots = snapshots
        self._machine = machine
        self._handler = handler
        self._compactor = compactor
        self._replies = replies
        self._log = log
        self._pub_url = pub_url
        self._unhandled = metrics.messages_dropped.labels(reason="unhandled_type")
        self.parked = ParkedReads(handler, replies, topic_totals, unread_over_limit)
        """``TR`` reads waiting for a record (answered by ``on_applied`` or ``sweep``)."""
        self.reads = reads
        """Reads waiting for a consistency level (issue #29): ``RI``, gated ``TR`` reads."""
        self.continued = ContinuedReads(self._answer)
        """Reads that stopped passing over unreadable records, going on (``sweep``)."""

    def on_applied(self, index: int) -> None:
        """A batch was applied (the consensus thread): answer parked reads that find data."""
        self.reads.on_applied(index)
        self.parked.on_applied(index)

    def sweep(self, now: float) -> None:
        """Each timer pass: answer parked reads whose wait ended, and go on with reads that
        stopped before a record (``ContinuedReads``)."""
        self.reads.sweep(now)
        self.parked.sweep(now)
        self.continued.run()

    def request_config(self, routing: bytes, msg_id: bytes, message: RequestConfig) -> None:
        """§10.1: leadership and the peers of the configuration in effect."""
        cluster = self._cluster
        answer = RequestConfigResponse(
            cluster.is_leader, cluster.leader_id, cluster.config.all_peers()
        )
        self._replies.reply(routing, msg_id, answer)

    def request_log_info(self, routing: bytes, msg_id: bytes, message: RequestLogInfo) -> None:
        """§10.2: this peer's view of the log (the prune index is §12.7's)."""
        cluster, bounds = self._cluster, self._log_bounds
        meta = self._snapshots.meta()
        oldest = bounds.oldest_request_index()
        answer = RequestLogInfoResponse(
            is_leader=cluster.is_leader,
            leader_id=cluster.leader_id,
            term=cluster.term,
            first_index=bounds.first_index,
            last_applied=self._machine.last_applied,
            commit_index=cluster.commit_index,
            last_index=bounds.last_index,
            snapshot_size=meta.size if meta is not None else 0,
            prune_index=bounds.last_index if oldest is None else oldest - 1,
        )
        self._replies.reply(routing, msg_id, answer)

    def broadcast_url(
        self, routing: bytes, msg_id: bytes, message: RequestBroadcastStateUrl
    ) -> None:
        """§11.1: every peer answers with its own PUB URL."""
        self._replies.reply(routing, msg_id, RequestBroadcastStateUrlResponse(self._pub_url))

    def compact(self, routing: bytes, msg_id: bytes, message: ClientDispatch) -> None:
        """``AC``: compact this peer's log now; the new snapshot index or "nothing", once
        the snapshot is built (over the next timer passes: ``CompactionPolicy.start``)."""

        def done(index: int | None) -> None:
            self._replies.reply(routing, msg_id, CompactResponse.of(index))

        self._compactor.start(done)

    def state_machine_request(self, routing: bytes, msg_id: bytes, message: ClientDispatch) -> None:
        """§10.6: any other type goes to the state machine; no answer from it -> dropped. A
        ``TR`` read that asks for a consistency level is served once it is met; a resend of
        a read this peer is going on with is dropped (``ContinuedReads``)."""
        if self.continued.holds(routing, msg_id):
            return
        level = read_level(message) if message.type == TYPE_READ else None
        if level is None:
            self._answer(routing, msg_id, message)
            return
        min_index, linearizable, plain = level

        def refuse(leader_id: str | None) -> None:
            frames = tuple(encode_not_served(leader_id))
            self._replies.reply(routing, msg_id, ClientDispatchResponse(frames))

        self.reads.gate(min_index=min_index, linearizable=linearizable,
                        serve=lambda: self._answer(routing, msg_id, plain), refuse=refuse)

    def _answer(self, routing: bytes, msg_id: bytes, message: ClientDispatch) -> None:
        answer = self._handler.handle_request(message.type, message.args)
        if answer is None:
            count = self._unhandled.inc()
            if count % LOG_SAMPLE == 1:
                self._log.warning(
                    "unhandled_type_dropped", count=count, msg_type=message.type[:8].hex()
                )
            return
        if self.continued.offer(routing, msg_id, message, answer):
            return  # its walk stopped before a record: it goes on in a later pass
        if (held := parkable(message, answer)) is not None and self.parked.park(
            routing, msg_id, message, *held
        ):  # a waiting TR read, or a TF fetch short of its thresholds (issue #27)
            return
        self._replies.reply(routing, msg_id, ClientDispatchResponse(tuple(answer)))
