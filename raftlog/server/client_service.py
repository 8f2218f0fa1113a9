"""Leader-side client updates: RequestUpdate, the topic publish ``TP``, ConfigUpdate, and
the bookkeeping of answers still pending.

One path for every update: ``=`` RequestUpdate and ``TP`` both propose with the topic gate as
the core's ``prepare`` -- so the request id is looked up once (by the core), a retry is never
re-validated, and a topic entry is stamped only when it is really appended
(``raftlog.topics.gate``) -- and both end in :meth:`_settle`. ``=`` updates are queued and
proposed as one batch per ROUTER drain (:meth:`propose_queued`: one clock reading, one id
lookup and one append for all of them, issue #28); the dispatcher keeps the arrival order.

RequestUpdate (docs/protocol.md §10.3) is answered ``[true, index]`` once ``index`` is
committed -- in the pass that commits it, before the state machine applies it
(``raftlog.server.update_waiters`` says why that is safe) -- and a ``TP`` publish once its
entry is applied (only the apply knows whether it was refused); ConfigUpdate (§10.4)
``[1]`` at once and ``[1, joint_index]`` when the core reports the change completed. When
the peer stops leading, everything still pending is answered "not leader" with the new
leader, if known (§10.3 (5)).
``TP`` answers like RequestUpdate, plus "refused" (``PublishStatus.REJECTED``) -- at once when
the gate refuses, or instead of "done" when the state machine refused the batch at apply.
A refused ``=`` update is ignored without an answer (RequestUpdate has no error answer a
client would understand) and counted.

The interim ``[true]`` is sent only to updates still waiting after ``ACCEPTED_DELAY`` (100 ms),
not at once as the reference does: on a healthy cluster the final answer arrives first, and
skipping the interim reply halves the replies a busy leader sends. The wire allows it (the
interim reply "may be sent", any number of times, §10.3), and 100 ms is well inside the 500 ms
after which clients give up on a silent peer.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Final, Protocol

from raftlog.consensus import (
    Appended,
    ConfigAccepted,
    ConfigDone,
    ConfigNotLeader,
    ConfigRejected,
    Duplicate,
    Expired,
    NotLeader,
    ProposeResult,
    Refused,
)
from raftlog.entry import REQUEST_ID_SIZE
from raftlog.metrics import PeerMetrics
from raftlog.rpc.messages import (
    TYPE_REQUEST_UPDATE,
    ClientDispatch,
    ConfigUpdate,
    ConfigUpdateResponse,
    ConfigUpdateStatus,
    RequestUpdate,
    RequestUpdateResponse,
    UpdateStatus,
)
from raftlog.server.interfaces import AppliedView, EventLog, Proposer, Replies
from raftlog.server.replies import ServerReply
from raftlog.server.update_waiters import UpdateWaiters, Waiter
from raftlog.topics.records import TopicError
from raftlog.topics.wire_publish import PublishReply, PublishStatus
from raftlog.transport import RunQueue, RunShape

ACCEPTED_DELAY: Final = 0.1
"""Seconds an update waits before its interim ``[true]`` is sent (see the module doc)."""
LOG_SAMPLE: Final = 100
"""Log one in this many refusals and drops (the counters keep them all)."""


class UpdateGate(Protocol):
    """What the update path asks before proposing (``TopicGate``)."""

    def prepare(self, data: bytes) -> bytes | TopicError:
        """The data to append for a new request at the leader, or why not."""
        ...

    def needs_prepare(self, datas: Iterable[bytes]) -> bool:
        """False when ``prepare`` would return each of ``datas`` unchanged (then the batch
        is proposed without it)."""
        ...

    def check_publish(self, msg_id: bytes, args: tuple[bytes, ...]) -> TopicError | None:
        """Why a ``TP`` request's frames are unacceptable, or None."""
        ...

    def refusal_at(self, index: int) -> TopicError | None:
        """Why the state machine refused the entry applied at ``index``, or None."""
        ...


class ClientService:
    """Proposes client updates and answers them when their entries are applied."""

    def __init__(
        self,
        proposer: Proposer,
        replies: Replies,
        *,
        machine: AppliedView,
        gate: UpdateGate,
        metrics: PeerMetrics,
        log: EventLog,
        max_data: int,
        now_ms: Callable[[], int],
        clock: Callable[[], float] = time.monotonic,
        latest_ms: Callable[[], int] | None = None,
        times: Callable[[], tuple[int, int | None]] | None = None,
        accepted_delay: float = ACCEPTED_DELAY,
    ) -> None:
        self._proposer = proposer
        self._replies = replies
        self._machine = machine
        self._gate = gate
        self._prepare = gate.prepare
        self._log = log
        self._max_data = max_data
        self._now_ms = now_ms
        self._latest_ms = latest_ms
        """The future edge of request-id freshness only (``raftlog.ids.is_fresh``)."""
        self._times = times if times is not None else self._read_times
        """``(now_ms, latest_ms)`` for one proposal; ``ClusterClock.now_and_latest`` reads
        both in one go (the hot path), else the two callables."""
        self._clock = clock
        self._accepted_delay = accepted_delay
        self._oversized = metrics.messages_dropped.labels(reason="oversized_update")
        self._refused = metrics.topic_publishes_refused
        self._accept_later: deque[tuple[float, int, list[Waiter]]] = deque()
        """``(when, first index, waiters)``: the interim ``[true]`` due then to each waiter
        still unanswered (at ``first``, ``first + 1``, ...)."""
        self._at_commit = UpdateWaiters()
        """Plain RequestUpdates: answered once their entry is committed (``on_committed``)."""
        self._at_apply = UpdateWaiters()
        """``TP`` publishes: answered once their entry is applied (``on_applied``)."""
        self._config_waiting: dict[int, list[tuple[bytes, bytes]]] = {}
        self._latency = metrics.update_latency_seconds.labels()
        self._proposed = {
            kind: metrics.proposals.labels(result=kind)
            for kind in ("appended", "duplicate", "not_leader", "expired", "refused")
        }
        self._appended = self._proposed["appended"]
        self._queued: list[tuple[bytes, bytes, bytes]] = []
        """RequestUpdates of this drain not yet proposed: ``(routing, request_id, data)``."""

    @property
    def pending_updates(self) -> int:
        """Updates waiting for their entry to be applied."""
        return len(self._at_commit) + len(self._at_apply)

    # -- the two ways in -------------------------------------------------------------------
    def request_update(self, routing: bytes, msg_id: bytes, msg: RequestUpdate) -> None:
        """``=`` (§10.3), queued for ``propose_queued``. Oversized data is dropped without an
        answer, like the reference."""
        if len(msg.data) > self._max_data:
            count = self._oversized.inc()
            if count % LOG_SAMPLE == 1:
                self._log.warning("oversized_update_ignored", size=len(msg.data), count=count)
            return
        self._queued.append((routing, msg.request_id, msg.data))

    def update_run(self, ident: bytes) -> RunShape:
        """The RequestUpdates a ROUTER drain may queue straight from the socket, in compiled
        runs (``raftlog.transport.take_run``, issue #28): exactly those the codec decodes
        and :meth:`request_update` queues -- ``[routing, id, "=", ident, data]`` with a
        12-byte request id and 1 to ``max_data`` bytes of data, no frame after it. Every
        other message, an oversized or malformed RequestUpdate included, ends the run and
        takes the general path, which decodes, counts and logs it as before."""
        return RunShape(TYPE_REQUEST_UPDATE, ident, REQUEST_ID_SIZE, self._max_data)

    @property
    def update_queue(self) -> RunQueue:
        """The queue :meth:`request_update` and a drain's runs fill and
        :meth:`propose_queued` empties (it starts a new list: ask again after a flush)."""
        return self._queued

    def propose_queued(self) -> None:
        """Propose every queued RequestUpdate as one batch, in arrival order: one clock
        reading, one request-id lookup, one append (issue #28). The dispatcher calls this
        before any other message and at the end of each ROUTER drain, so no other handler
        ever sees the queue non-empty and the order of effects is the arrival order."""
        queued = self._queued
        if not queued:
            return
        self._queued = []
        now_ms, latest_ms = self._times()
        requests = [(rid, data) for _, rid, data in queued]
        prepare = self._prepare if self._gate.needs_prepare(map(_DATA, requests)) else None
        results = self._proposer.propose_many(requests, now_ms, prepare, latest_ms=latest_ms)
        now = self._clock()
        appended: list[Waiter] = []  # the batch's appended updates, at consecutive indexes
        others: list[tuple[bytes, bytes, ProposeResult]] = []
        first = 0
        for (routing, rid, _), result in zip(queued, results, strict=True):
            if result.__class__ is Appended:
                if not appended:
                    first = result.index
                appended.append((routing, rid, False))
            else:
                others.append((routing, rid, result))
        if appended:  # one run: one queue entry, one accept entry (update_waiters.WaiterRun)
            self._appended.inc(len(appended))
            self._accept_later.append((now + self._accepted_delay, first, appended))
            self._at_commit.add_run(first, appended, now)
        # After the run: a retry in the same batch (a Duplicate of an entry the batch itself
        # appended) then finds its request there and waits once, not beside it.
        for routing, rid, result in others:
            self._settle(routing, rid, result, now, publish=False)

    def publish(self, routing: bytes, msg_id: bytes, msg: ClientDispatch) -> None:
        """``TP``: the frames checked and answered, then proposed like ``=``."""
        error = self._gate.check_publish(msg_id, msg.args)
        if error is not None:
            self._refuse(routing, msg_id, error, publish=True)
            return
        now_ms, latest_ms = self._times()
        result = self._proposer.propose(
            msg_id, msg.args[0], now_ms, self._prepare, latest_ms=latest_ms
        )
        self._settle(routing, msg_id, result, self._clock(), publish=True)

    def _read_times(self) -> tuple[int, int | None]:
        latest = self._latest_ms
        return self._now_ms(), None if latest is None else latest()

    # -- what a proposal's result asks for ----------------------------------------------------
    def _settle(
        self, routing: bytes, rid: bytes, result: ProposeResult, now: float, *, publish: bool
    ) -> None:
        """Count the outcome; answer now, or wait for the entry."""
        if isinstance(result, Appended):
            self._appended.inc()
            self._wait(result.index, routing, rid, publish, now)
        elif isinstance(result, Duplicate):
            self._proposed["duplicate"].inc()
            if result.index <= self._machine.last_applied:
                self._answer_done((routing, rid, publish), result.index)
            else:
                self._wait(result.index, routing, rid, publish, now)
        elif isinstance(result, NotLeader):
            self._proposed["not_leader"].inc()
            self._answer(routing, rid, publish, UpdateStatus.NOT_LEADER, leader_id=result.leader_id)
        elif isinstance(result, Expired):
            self._proposed["expired"].inc()
            self._answer(routing, rid, publish, UpdateStatus.EXPIRED)
        elif isinstance(result, Refused):
            self._proposed["refused"].inc()
            reason = result.reason
            error = reason if isinstance(reason, TopicError) else TopicError("Refused", str(reason))
            self._refuse(routing, rid, error, publish=publish)

    def _wait(self, index: int, routing: bytes, rid: bytes, publish: bool, now: float) -> None:
        """Answer once ``index`` is committed (``=``) or applied (``TP``); the interim
        ``[true]`` after the accepted delay."""
        waiter = (routing, rid, publish)
        self._accept_later.append((now + self._accepted_delay, index, [waiter]))
        waiting = self._at_apply if publish else self._at_commit
        waiting.add(index, waiter, now)

    def _answer(
        self,
        routing: bytes,
        rid: bytes,
        publish: bool,
        status: UpdateStatus,
        *,
        index: int | None = None,
        leader_id: str | None = None,
    ) -> None:
        reply: ServerReply
        if publish:
            reply = PublishReply(_PUBLISH_STATUS[status], index=index, leader_id=leader_id)
        else:
            reply = RequestUpdateResponse(rid, status, index=index, leader_id=leader_id)
        self._replies.reply(routing, rid, reply)

    def _answer_done(self, waiter: Waiter, index: int) -> None:
        routing, rid, publish = waiter
        if not publish:  # the common case, straight to the reply
            self._replies.update_done(routing, rid, index)
            return
        refused = self._gate.refusal_at(index)
        if refused is None:
            self._answer(routing, rid, publish, UpdateStatus.DONE, index=index)
        else:
            self._replies.reply(routing, rid, PublishReply(PublishStatus.REJECTED, error=refused))

    def _refuse(self, routing: bytes, rid: bytes, error: TopicError, *, publish: bool) -> None:
        via = "publish" if publish else "update"
        count = self._refused.labels(via=via).inc()
        if count % LOG_SAMPLE == 1:
            self._log.info(
                "topic_publish_refused",
                via=via,
                request_id=rid.hex(),
                error=error.name,
                reason=error.message,
                count=count,
            )
        if publish:
            self._replies.reply(routing, rid, PublishReply(PublishStatus.REJECTED, error=error))

    # -- timers and progress ---------------------------------------------------------------
    def send_overdue_accepts(self, now: float) -> None:
        """Send the interim ``[true]`` to every update still waiting after the delay."""
        queue = self._accept_later
        applied = self._machine.last_applied
        while queue and queue[0][0] <= now:
            _, first, waiters = queue.popleft()
            for offset, (routing, rid, publish) in enumerate(waiters):
                if first + offset > applied:
                    self._answer(routing, rid, publish, UpdateStatus.ACCEPTED)

    def on_committed(self, committed: int) -> None:
        """Answer every plain RequestUpdate whose entry is now committed (called before the
        state machine applies it: ``raftlog.server.update_waiters`` says why)."""
        if self._at_commit.due(committed):
            self._release(self._at_commit, committed)

    def on_applied(self, applied: int) -> None:
        """Answer every publish whose entry the state machine has now applied (and any
        plain update still waiting: a driver without ``on_committed`` answers them here)."""
        if self._at_apply.due(applied):
            self._release(self._at_apply, applied)
        if self._at_commit.due(applied):
            self._release(self._at_commit, applied)

    def _release(self, waiting: UpdateWaiters, through: int) -> None:
        answer, latency, now = self._answer_done, self._latency, self._clock()
        for index, waited, waiters in waiting.release(through, now):
            for waiter in waiters:
                answer(waiter, index)
                latency.observe(waited)
        for first, waited, waiters in waiting.release_runs(through, now):
            self._replies.updates_done(first, waiters)  # runs hold plain updates only
            latency.observe_many(waited, len(waiters))

    # -- ConfigUpdate ----------------------------------------------------------------------
    def config_update(self, routing: bytes, msg_id: bytes, msg: ConfigUpdate) -> None:
        """§10.4: propose the change; answer now, and again once it completed."""
        latest = None if self._latest_ms is None else self._latest_ms()
        result = self._proposer.propose_config(
            msg.request_id, msg.peers, self._now_ms(), latest_ms=latest
        )
        rid = msg.request_id
        reply = ConfigUpdateResponse(rid, result.status)
        if isinstance(result, ConfigAccepted):
            self._config_waiting.setdefault(result.joint_index, []).append((routing, rid))
        elif isinstance(result, ConfigDone):
            reply = ConfigUpdateResponse(rid, result.status, index=result.index)
        elif isinstance(result, ConfigNotLeader):
            reply = ConfigUpdateResponse(rid, result.status, leader_id=result.leader_id)
        elif isinstance(result, ConfigRejected):
            reply = ConfigUpdateResponse(rid, result.status, error=result.error)
        self._replies.reply(routing, rid, reply)  # ConfigBusy, ConfigExpired: the status alone

    def on_config_completed(self, joint_index: int) -> None:
        """The change started at ``joint_index`` completed: answer its requesters."""
        for routing, rid in self._config_waiting.pop(joint_index, ()):
            done = ConfigUpdateResponse(rid, ConfigUpdateStatus.OK, index=joint_index)
            self._replies.reply(routing, rid, done)

    # -- leadership lost -------------------------------------------------------------------
    def fail_all(self, leader_id: str | None) -> None:
        """§10.3 (5) / §10.4 (8): answer everything pending with "not leader"."""
        for waiting in (self._at_commit, self._at_apply):
            for routing, rid, publish in waiting.drain():
                self._answer(routing, rid, publish, UpdateStatus.NOT_LEADER, leader_id=leader_id)
        for waiters in self._config_waiting.values():
            for routing, rid in waiters:
                status = ConfigUpdateStatus.NOT_LEADER
                self._replies.reply(
                    routing, rid, ConfigUpdateResponse(rid, status, leader_id=leader_id)
                )
        self._config_waiting.clear()
        self._accept_later.clear()


_DATA: Final = itemgetter(1)
"""The data of a ``(request id, data)`` request."""
_PUBLISH_STATUS: Final = {
    UpdateStatus.ACCEPTED: PublishStatus.ACCEPTED,
    UpdateStatus.DONE: PublishStatus.DONE,
    UpdateStatus.NOT_LEADER: PublishStatus.NOT_LEADER,
    UpdateStatus.EXPIRED: PublishStatus.EXPIRED,
}
