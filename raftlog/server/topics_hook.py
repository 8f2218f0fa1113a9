"""The leader's gate for topic entries (issue #7): validate, stamp, then propose.

Why here and not in the state machine: a refused publish must never enter the log, and
only the proposer can keep it out; the state machine sees entries after they committed.
Why a publish is an update: the core's RequestUpdate path already gives idempotency (a
request id is appended at most once, across leader changes), the "accepted"/"done"
answers and the "not leader" answers on step-down. So both ways in end in
``ClientService.request_update`` with the same request id:

* ``TP`` (``raftlog.rpc.topics``): the publish RPC. Frames and answers are RequestUpdate's,
  plus a "refused" answer carrying ``{name, message}``; the topic client uses it.
* ``=`` RequestUpdate whose data is a topic entry (what a plain or reference client sends):
  validated and stamped the same way; a refused one is ignored without an answer, like the
  other invalid updates of §10.3 (RequestUpdate has no error answer a client would
  understand), and logged.

Order of the leader's checks: not a topic entry or not the leader -> untouched (the core
answers "not leader"); request id already in the log -> untouched, so a retry after a leader
change gets the original index even if the topic changed since (idempotency first); else
decode, check against the applied topics (``check_entry``), stamp the append time
(``AppendClock``: never earlier than this leader's previous stamp) and the AUTO_CREATE
flag from this peer's ``topic_auto_create`` option. The state machine re-checks at apply, so
an admin command committed in between can still refuse a batch, deterministically.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from raftlog.entry import REQUEST_ID_SIZE
from raftlog.records import (
    AppendClock,
    RecordFormatError,
    TopicError,
    decode_entry,
    is_topic_data,
)
from raftlog.rpc.messages import RequestUpdate
from raftlog.rpc.topics import bad_request, encode_publish_rejection
from raftlog.statemachine.topic_reads import wall_ms
from raftlog.statemachine.topics import TopicStateMachine, check_entry

if TYPE_CHECKING:
    from raftlog.server.node import PeerNode

LOG_SAMPLE: Final = 100
"""Log one in this many refusals (the counter keeps them all)."""


class TopicPublishHook:
    def __init__(
        self,
        node: PeerNode,
        machine: TopicStateMachine,
        *,
        auto_create: bool,
        now_ms: Callable[[], int] = wall_ms,
    ) -> None:
        self._node = node
        self._machine = machine
        self._auto_create = auto_create
        self._now_ms = now_ms
        self._max_data = node.settings.options.max_log_entry_data_size
        self.clock = AppendClock()

    def _prepare(self, request_id: bytes, data: bytes) -> bytes | TopicError:
        """The data to propose (stamped when it is a new topic entry), or why not."""
        node = self._node
        if not is_topic_data(data) or not node.core.is_leader:
            return data
        if node.store.index_of_request(request_id) is not None:
            return data  # a retry: the core answers with the index it already has
        try:
            entry = decode_entry(data)
        except RecordFormatError as exc:
            return exc
        if entry is None:  # unreachable: the magic was checked
            return data
        error = check_entry(entry, self._machine.topics, self._auto_create)
        if error is not None:
            return error
        return self.clock.stamp(data, self._now_ms(), auto_create=self._auto_create)

    def _refused(self, error: TopicError, request_id: bytes, via: str) -> None:
        stats = self._node.stats
        stats["topic_publish_refused"] += 1
        if stats["topic_publish_refused"] % LOG_SAMPLE == 1:
            self._node.log.info(
                "topic_publish_refused",
                via=via,
                request_id=request_id.hex(),
                error=error.name,
                reason=error.message,
                count=stats["topic_publish_refused"],
            )

    def request_update(self, message: RequestUpdate) -> RequestUpdate | None:
        """``=``: the update to propose (stamped if it is a topic entry), or None to ignore."""
        prepared = self._prepare(message.request_id, message.data)
        if isinstance(prepared, TopicError):
            self._refused(prepared, message.request_id, "update")
            return None
        if prepared is message.data:
            return message
        return RequestUpdate(message.request_id, prepared)

    def publish(self, routing: bytes, msg_id: bytes, args: Sequence[bytes]) -> None:
        """``TP``: propose like RequestUpdate, or answer why not."""
        node = self._node
        error = self._frames_error(msg_id, args)
        result = error if error is not None else self._prepare(msg_id, args[0])
        if isinstance(result, TopicError):
            self._refused(result, msg_id, "publish")
            node.reply(routing, [msg_id, *encode_publish_rejection(result)])
            return
        node.clients.request_update(
            routing, RequestUpdate(msg_id, result), node.machine.last_applied, refusal=self._refusal
        )

    def _refusal(self, index: int) -> list[bytes] | None:
        """The answer for a publish whose batch the state machine refused at apply (the leader
        checked it against topics that an admin command then changed)."""
        error = self._machine.refusal_at(index)
        return None if error is None else encode_publish_rejection(error)

    def _frames_error(self, msg_id: bytes, args: Sequence[bytes]) -> TopicError | None:
        """What the dispatcher checks for ``=`` (and drops silently), answered here."""
        if len(msg_id) != REQUEST_ID_SIZE:
            return bad_request(f"the id frame of TP must be a {REQUEST_ID_SIZE}-byte request id")
        if len(args) != 1 or not is_topic_data(args[0]):
            return bad_request("TP takes exactly one frame: a topic entry (raftlog.records)")
        if len(args[0]) > self._max_data:
            return TopicError(
                "EntryTooLarge",
                f"entry data of {len(args[0])} bytes exceeds max_log_entry_data_size "
                f"{self._max_data}",
            )
        return None
