"""Leader-side client RPCs: RequestUpdate, ConfigUpdate and the pending-answer bookkeeping.

RequestUpdate (docs/protocol.md §10.3) is answered ``[true]`` at once and ``[true, index]``
only once the state machine has applied ``index``; ConfigUpdate (§10.4) ``[1]`` at once and
``[1, joint_index]`` when the core reports the change completed. When the peer stops leading,
everything still pending is answered "not leader" with the new leader, if known (§10.3 (5)).

The interim ``[true]`` is sent only to updates still waiting after ``ACCEPTED_DELAY`` (100 ms),
not at once as the reference does: on a healthy cluster the final answer arrives first, and
skipping the interim reply halves the replies a busy leader sends. The wire allows it (the
interim reply "may be sent", any number of times, §10.3), and 100 ms is well inside the 500 ms
after which clients give up on a silent peer.

The core decides everything about idempotency and freshness (``RaftCore.propose``); this
module only remembers *who* to answer and *when*.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable
from typing import Final

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
    RaftCore,
)
from raftlog.rpc.frames import JSON_NULL, encode_uint, pack_json
from raftlog.rpc.messages import ConfigUpdate, RequestUpdate

ACCEPTED_DELAY: Final = 0.1
"""Seconds an update waits before its interim ``[true]`` is sent (see the module doc)."""
TRUE: Final = b"\x01"
FALSE: Final = b""

Reply = Callable[[bytes, list[bytes]], None]
Refusal = Callable[[int], list[bytes] | None]
"""``refusal(index)``: the answer frames (after the id) when the applied entry was refused."""
"""``reply(routing_id, frames)``: send ``frames`` (starting with the echoed id) to a client."""


class ClientService:
    """Pending RequestUpdate/ConfigUpdate answers, keyed by the index they wait for."""

    def __init__(
        self,
        core: RaftCore,
        reply: Reply,
        now_ms: Callable[[], int],
        *,
        clock: Callable[[], float] = time.monotonic,
        accepted_delay: float = ACCEPTED_DELAY,
    ) -> None:
        self._core = core
        self._reply = reply
        self._now_ms = now_ms
        self._clock = clock
        self._accepted_delay = accepted_delay
        self._accept_later: deque[tuple[float, int, bytes, bytes]] = deque()
        self._waiting: dict[int, list[tuple[bytes, bytes, Refusal | None]]] = {}
        self._waiting_heap: list[int] = []
        self._config_waiting: dict[int, list[tuple[bytes, bytes]]] = {}
        self.ignored_updates = 0

    @property
    def pending_updates(self) -> int:
        return sum(len(v) for v in self._waiting.values())

    # -- RequestUpdate ---------------------------------------------------------------------
    def request_update(
        self,
        routing: bytes,
        msg: RequestUpdate,
        applied: int,
        *,
        refusal: Refusal | None = None,
    ) -> None:
        """Propose ``msg``; answer now or once applied. ``refusal(index)``: for updates whose
        entry a state machine may refuse when it applies it (a topic publish racing a topic
        deletion), the answer to send instead of "done", or None."""
        result = self._core.propose(msg.request_id, msg.data, self._now_ms())
        rid = msg.request_id
        if isinstance(result, Appended | Duplicate):
            index = result.index
            if index <= applied:
                self._answer_done(routing, rid, index, refusal)
                return
            self._accept_later.append((self._clock() + self._accepted_delay, index, routing, rid))
            waiters = self._waiting.get(index)
            if waiters is None:
                self._waiting[index] = [(routing, rid, refusal)]
                heapq.heappush(self._waiting_heap, index)
            elif all(w[:2] != (routing, rid) for w in waiters):
                waiters.append((routing, rid, refusal))
        elif isinstance(result, NotLeader):
            self._reply(routing, [rid, FALSE, pack_json(result.leader_id)])
        elif isinstance(result, Expired):
            self._reply(routing, [rid, FALSE])

    def send_overdue_accepts(self, now: float, applied: int) -> None:
        """Send the interim ``[true]`` to every update still waiting after the delay."""
        queue = self._accept_later
        while queue and queue[0][0] <= now:
            _, index, routing, rid = queue.popleft()
            if index > applied:
                self._reply(routing, [rid, TRUE])

    def on_applied(self, applied: int) -> None:
        """Answer every update whose entry the state machine has now applied."""
        heap = self._waiting_heap
        while heap and heap[0] <= applied:
            index = heapq.heappop(heap)
            for routing, rid, refusal in self._waiting.pop(index, ()):
                self._answer_done(routing, rid, index, refusal)

    def _answer_done(self, routing: bytes, rid: bytes, index: int, refusal: Refusal | None) -> None:
        refused = None if refusal is None else refusal(index)
        self._reply(routing, [rid, TRUE, pack_json(index)] if refused is None else [rid, *refused])

    # -- ConfigUpdate ----------------------------------------------------------------------
    def config_update(self, routing: bytes, msg: ConfigUpdate) -> None:
        result = self._core.propose_config(msg.request_id, msg.peers, self._now_ms())
        rid = msg.request_id
        status = encode_uint(result.status)
        if isinstance(result, ConfigAccepted):
            self._config_waiting.setdefault(result.joint_index, []).append((routing, rid))
            self._reply(routing, [rid, status])
        elif isinstance(result, ConfigDone):
            self._reply(routing, [rid, status, pack_json(result.index)])
        elif isinstance(result, ConfigNotLeader):
            self._reply(routing, [rid, status, pack_json(result.leader_id)])
        elif isinstance(result, ConfigRejected):
            error = {"name": result.error.name, "message": result.error.message}
            self._reply(routing, [rid, status, pack_json(error)])
        elif isinstance(result, ConfigBusy | ConfigExpired):
            self._reply(routing, [rid, status])

    def on_config_completed(self, joint_index: int) -> None:
        done = pack_json(joint_index)
        for routing, rid in self._config_waiting.pop(joint_index, ()):
            self._reply(routing, [rid, encode_uint(1), done])

    # -- leadership lost -------------------------------------------------------------------
    def fail_all(self, leader_id: str | None) -> None:
        """§10.3 (5) / §10.4 (8): answer everything pending with "not leader"."""
        leader = pack_json(leader_id) if leader_id is not None else JSON_NULL
        for update_waiters in self._waiting.values():
            for routing, rid, _ in update_waiters:
                self._reply(routing, [rid, FALSE, leader])
        self._waiting.clear()
        self._waiting_heap.clear()
        for waiters in self._config_waiting.values():
            for routing, rid in waiters:
                self._reply(routing, [rid, encode_uint(0), leader])
        self._config_waiting.clear()
        self._accept_later.clear()
