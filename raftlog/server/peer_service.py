"""Inbound peer RPCs: RequestVote, AppendEntries, InstallSnapshot (docs/protocol.md §6-§9).

The rules that live here, in front of the core:

* §6: peer RPCs from ids outside the configuration are dropped without an answer --
  otherwise anyone who knows the ident could depose the leader with a huge term
  (RELIABILITY B5). While the configuration is unknown (right after a snapshot install)
  every sender is heard, or the peer could never learn it.
* Debounce: AppendEntries/InstallSnapshot with the same (routing id, msgid) as the last one
  processed from that leader is answered from the cached reply (or dropped while the first
  copy is still being processed), because a reference leader retransmits the identical
  message until it hears back. A debounced retransmission still tells the core its leader
  is alive (``heard_from_leader``): it is the only sign of life a follower gets from a
  stop-and-wait leader whose previous answer was lost (issue #12, finding 3).
* Unknown senders are counted every time and logged once per sender.
* An AppendEntries carrying an entry over this peer's ``max_log_entry_data_size`` is not
  stepped as it came: its storage would refuse the entry and the peer would exit (a leader
  whose limit was raised first in a rolling change, or a misconfigured one, made every
  such follower exit on the next large record). Its entries are dropped, counted
  (``raftlog_messages_dropped{reason="entry_too_large"}``) and logged once per entry; the
  rest of it is stepped with no entries and no answer, so the core learns the leader and
  its term like from a heartbeat -- no election, even when the leader is new -- and stores
  nothing. Answering would not be safe: the leader takes a success as a match of every
  entry it sent. This peer stays behind at that entry until its limit is raised; the
  others go on (``tests/faults/test_entry_limit_mismatch.py``).

The core's answer (``SendReply``) comes back through :meth:`PeerService.send_reply` (the
executor's ``Outbox``) and leaves through ``Replies`` like every other answer.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from raftlog.metrics import PeerMetrics
from raftlog.rpc.messages import AppendEntries, InstallSnapshot, PeerResponse, RequestVote
from raftlog.server.interfaces import ClusterView, EventLog, PeerRequestSink, Replies

MAX_DEBOUNCED_LEADERS: Final = 64


class PeerToken:
    """Identifies an inbound peer request so its reply can find the way back."""

    __slots__ = ("answered", "leader_id", "msg_id", "routing")

    def __init__(
        self, routing: bytes, msg_id: bytes, leader_id: str | None, *, answered: bool = True
    ) -> None:
        self.routing = routing
        self.msg_id = msg_id
        self.leader_id = leader_id
        self.answered = answered
        """False: the core's answer is not sent (an AppendEntries stripped of entries over
        this peer's limit, module docstring)."""


class PeerService:
    """Checks senders, debounces retransmissions, steps the core, routes its answers."""

    def __init__(
        self,
        cluster: ClusterView,
        core: PeerRequestSink,
        replies: Replies,
        metrics: PeerMetrics,
        log: EventLog,
        *,
        max_entry_data: int,
    ) -> None:
        """``max_entry_data``: this peer's ``max_log_entry_data_size`` (module docstring)."""
        self._cluster = cluster
        self._max_entry_data = max_entry_data
        self._too_large = metrics.messages_dropped.labels(reason="entry_too_large")
        self._too_large_logged = 0
        self._core = core
        self._replies = replies
        self._log = log
        self._unknown = metrics.messages_dropped.labels(reason="unknown_sender")
        self._resends = metrics.debounced_resends
        self._debounce: dict[str, tuple[bytes, bytes, PeerResponse | None]] = {}
        self._unknown_logged: set[str] = set()

    def request_vote(self, routing: bytes, msg_id: bytes, message: RequestVote) -> None:
        """§7: step a vote request from a known candidate."""
        if self._known_sender(message.candidate_id):
            self._core.step_request(PeerToken(routing, msg_id, None), message)

    def from_leader(
        self, routing: bytes, msg_id: bytes, message: AppendEntries | InstallSnapshot
    ) -> None:
        """§8/§9: step AppendEntries/InstallSnapshot once per (routing, msgid) per leader."""
        leader = message.leader_id
        if not self._known_sender(leader):
            return
        if isinstance(message, AppendEntries) and self._over_limit(message):
            stripped = replace(message, entries=())  # a heartbeat: term and leader, nothing
            self._core.step_request(PeerToken(routing, msg_id, None, answered=False), stripped)
            return
        last = self._debounce.get(leader)
        if last is not None and last[0] == routing and last[1] == msg_id:
            # A retransmission: the leader is alive (it is only waiting for our answer), so
            # the core must hear of it or its election timer runs out (issue #12, finding 3).
            self._core.heard_from_leader(leader, message.term)
            if last[2] is not None:
                self._resends.inc()
                self._replies.reply(routing, msg_id, last[2])
            return
        if last is None and len(self._debounce) >= MAX_DEBOUNCED_LEADERS:
            self._debounce.clear()  # bound memory against made-up leader ids
        self._debounce[leader] = (routing, msg_id, None)
        self._core.step_request(PeerToken(routing, msg_id, leader), message)

    def send_reply(self, token: object, message: PeerResponse) -> None:
        """Answer an inbound peer request (the core's ``SendReply``); remembered for a
        retransmission of the same message."""
        if not isinstance(token, PeerToken):
            raise TypeError(f"foreign reply token {token!r}")
        if not token.answered:
            return
        if token.leader_id is not None:
            last = self._debounce.get(token.leader_id)
            if last is not None and last[0] == token.routing and last[1] == token.msg_id:
                self._debounce[token.leader_id] = (token.routing, token.msg_id, message)
        self._replies.reply(token.routing, token.msg_id, message)

    def _over_limit(self, message: AppendEntries) -> bool:
        limit = self._max_entry_data
        for offset, entry in enumerate(message.entries):
            if len(entry.data) > limit:
                count = self._too_large.inc()
                index = message.prev_log_index + 1 + offset
                if index != self._too_large_logged:  # the leader resends it: log it once
                    self._too_large_logged = index
                    self._log.error(
                        "entry_over_limit_dropped", leader=message.leader_id[:64], index=index,
                        size=len(entry.data), max_log_entry_data_size=limit, count=count,
                        note="this peer stays behind until its max_log_entry_data_size is raised",
                    )
                return True
        return False

    def _known_sender(self, sender: str) -> bool:
        cluster = self._cluster
        if not cluster.config_known or any(p.id == sender for p in cluster.config.all_peers()):
            return True
        # Counted every time, logged once per sender: a removed peer that keeps campaigning
        # would otherwise fill the log every few seconds (issue #13 item 5).
        count = self._unknown.inc()
        name = sender[:64]
        if name not in self._unknown_logged and len(self._unknown_logged) < MAX_DEBOUNCED_LEADERS:
            self._unknown_logged.add(name)
            self._log.warning(
                "unknown_sender_dropped", count=count, sender=name, note="logged once per sender"
            )
        return False
