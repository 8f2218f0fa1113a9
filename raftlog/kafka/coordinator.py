"""Kafka consumer-group membership: soft state on the leader's listener, like Kafka's
group coordinator.

Why soft state: membership (who is in a group now, its generation, the leader's partition
assignment) is only meaningful while the members' connections and heartbeats are; Kafka
itself rebuilds it after a coordinator moves. What must survive -- the committed offsets --
is durable: OffsetCommit goes to the stream-mode consumer group of the same name
(``raftlog.topics.groups``), replicated in the log. FindCoordinator names the Raft leader's
listener; any other listener answers group requests with NOT_COORDINATOR, and after a
leader change the members rejoin at the new leader and resume from the committed offsets.

The protocol, simplified but the same to clients: a JoinGroup starts (or joins) a
rebalance, which completes when every current member has rejoined -- or after the largest
rebalance timeout, evicting those that did not -- or, for members joining an empty group,
after a short window (:data:`JOIN_WINDOW`) that lets consumers started together land in one
generation. The first member to join is the leader; it gets every member's subscription and
sends the assignment with SyncGroup. Heartbeats answer REBALANCE_IN_PROGRESS while a
rebalance runs, so members rejoin; a member whose session timeout passes without a heartbeat
is evicted (a sweep once a second).

Clients create this state, so it is bounded (``[kafka]``'s group limits,
:class:`~raftlog.kafka.settings.GroupLimits`): the session timeouts a member may ask for,
the members of a group and of all groups, and the bytes of client-chosen data held (ids,
protocol metadata, assignments). A join past them is refused -- Kafka's
INVALID_SESSION_TIMEOUT and GROUP_MAX_SIZE_REACHED, COORDINATOR_NOT_AVAILABLE (retriable)
for the listener-wide ones -- counted in ``refusals`` and logged once a second.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

from kio.schema.errors import ErrorCode

from raftlog.kafka.settings import GroupLimits
from raftlog.observability.flood_log import FloodLog

JOIN_WINDOW: Final = 0.3
"""Seconds a rebalance of a group without members waits for more joiners."""
SYNC_WAIT: Final = 30.0
"""Seconds a follower member's SyncGroup waits for the leader's assignment."""
MAX_REBALANCE_WAIT: Final = 60.0
REFUSALS: Final = {
    "session_timeout": ErrorCode.invalid_session_timeout,
    "group_max_size": ErrorCode.group_max_size_reached,
    "max_group_members": ErrorCode.coordinator_not_available,
    "max_group_state_bytes": ErrorCode.coordinator_not_available,
}
"""Why a join (or an assignment) was refused -> the error its client gets."""


@dataclass(slots=True)
class Member:
    """One consumer in a group."""

    member_id: str
    instance_id: str | None
    protocols: dict[str, bytes]
    session_s: float
    rebalance_s: float
    last_seen: float = field(default_factory=time.monotonic)
    assignment: bytes = b""

    def held_bytes(self, group_id: str) -> int:
        """The client-chosen bytes the coordinator keeps for this member (its group's id
        counted with each member: an upper bound that needs no per-group bookkeeping)."""
        return (len(group_id) + len(self.member_id) + len(self.instance_id or "")
                + len(self.assignment) + sum(len(k) + len(v) for k, v in self.protocols.items()))


@dataclass(slots=True)
class GroupState:
    """A group's membership on this (the leader's) listener."""

    group_id: str
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    members: dict[str, Member] = field(default_factory=dict)
    rebalancing: bool = False
    joiners: dict[str, asyncio.Future[None]] = field(default_factory=dict)
    synced: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(frozen=True, slots=True)
class JoinResult:
    """What one member's JoinGroup is answered with."""

    error: ErrorCode
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()


class Coordinator:
    """Every group's membership (one per listener; used only while this peer leads)."""

    def __init__(self, limits: GroupLimits | None = None) -> None:
        self.limits = limits or GroupLimits()
        self.groups: dict[str, GroupState] = {}
        self.members = 0
        """Members of all groups."""
        self.held_bytes = 0
        """Client-chosen bytes held for them (:meth:`Member.held_bytes`)."""
        self.refusals: Counter[str] = Counter(dict.fromkeys(REFUSALS, 0))
        """Joins and assignments refused since start, by reason (``/metrics``)."""
        self._log = FloodLog()

    def _refuse(self, reason: str, group_id: str) -> ErrorCode:
        self.refusals[reason] += 1
        self._log.event("kafka_group_join_refused", reason=reason, group=group_id[:128],
                        members=self.members, held_bytes=self.held_bytes)
        return REFUSALS[reason]

    def _admission(self, group_id: str, member: Member) -> ErrorCode | None:
        """Why ``member`` may not join (None: it may), by the limits."""
        limits, group = self.limits, self.groups.get(group_id)
        old = None if group is None else group.members.get(member.member_id)
        if not limits.min_session_ms <= member.session_s * 1000 <= limits.max_session_ms:
            return self._refuse("session_timeout", group_id)
        if old is None and group is not None and len(group.members) >= limits.max_size:
            return self._refuse("group_max_size", group_id)
        if old is None and self.members >= limits.max_members:
            return self._refuse("max_group_members", group_id)
        grown = member.held_bytes(group_id) - (0 if old is None else old.held_bytes(group_id))
        if self.held_bytes + grown > limits.max_state_bytes:
            return self._refuse("max_group_state_bytes", group_id)
        return None

    def _admit(self, group: GroupState, member: Member) -> None:
        old = group.members.get(member.member_id)
        if old is not None:
            self.held_bytes -= old.held_bytes(group.group_id)
            self.members -= 1
        group.members[member.member_id] = member
        self.held_bytes += member.held_bytes(group.group_id)
        self.members += 1

    def _drop(self, group: GroupState, member_id: str) -> None:
        member = group.members.pop(member_id)
        self.held_bytes -= member.held_bytes(group.group_id)
        self.members -= 1

    async def join(self, group_id: str, member_id: str, *, instance_id: str | None,
                   protocol_type: str, protocols: dict[str, bytes], session_s: float,
                   rebalance_s: float) -> JoinResult:
        """JoinGroup (see the module docstring)."""
        known = self.groups.get(group_id)
        current = {} if known is None else known.members
        if current and known and known.protocol_type not in (None, protocol_type):
            return JoinResult(ErrorCode.inconsistent_group_protocol)
        if member_id and member_id not in current:
            return JoinResult(ErrorCode.unknown_member_id)
        member = Member(member_id or f"{instance_id or 'member'}-{uuid.uuid4()}", instance_id,
                        protocols, session_s, rebalance_s)
        if (refusal := self._admission(group_id, member)) is not None:
            return JoinResult(refusal)
        member_id = member.member_id
        group = self.groups.setdefault(group_id, GroupState(group_id))
        self._admit(group, member)
        group.protocol_type = protocol_type
        if not group.rebalancing:
            self._start_rebalance(group)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        old = group.joiners.pop(member_id, None)
        if old is not None and not old.done():
            old.cancel()
        group.joiners[member_id] = future
        self._maybe_complete(group)
        try:
            await future
        except asyncio.CancelledError:
            return JoinResult(ErrorCode.rebalance_in_progress)
        if member_id not in group.members:
            return JoinResult(ErrorCode.unknown_member_id)
        members = tuple((m.member_id, m.instance_id, m.protocols.get(group.protocol or "", b""))
                        for m in group.members.values()) if member_id == group.leader else ()
        return JoinResult(ErrorCode.none, group.generation, group.protocol_type,
                          group.protocol, group.leader, member_id, members)

    def _start_rebalance(self, group: GroupState) -> None:
        group.rebalancing = True
        group.synced = asyncio.Event()
        empty = len(group.members) <= 1 and not group.joiners
        wait = JOIN_WINDOW if empty else min(
            max(m.rebalance_s for m in group.members.values()), MAX_REBALANCE_WAIT)
        asyncio.get_running_loop().call_later(wait, self._deadline, group, group.generation)

    def _deadline(self, group: GroupState, generation: int) -> None:
        if self.groups.get(group.group_id) is not group:
            return  # cleared (leadership lost) or swept since: its members are not counted
        if group.rebalancing and group.generation == generation:
            for member_id in [m for m in group.members if m not in group.joiners]:
                self._drop(group, member_id)  # did not rejoin in time
            self._complete(group)

    def _maybe_complete(self, group: GroupState) -> None:
        if len(group.members) > 1 and set(group.members) <= set(group.joiners):
            self._complete(group)

    def _complete(self, group: GroupState) -> None:
        if not group.joiners:
            group.rebalancing = False
            return
        group.generation += 1
        group.rebalancing = False
        group.leader = next(iter(group.joiners))
        common = [name for name in group.members[group.leader].protocols
                  if all(name in m.protocols for m in group.members.values())]
        group.protocol = common[0] if common else None
        joiners, group.joiners = group.joiners, {}
        for future in joiners.values():
            if not future.done():
                future.set_result(None)

    async def sync(self, group_id: str, generation: int, member_id: str,
                   assignments: dict[str, bytes]) -> tuple[ErrorCode, bytes]:
        """SyncGroup: the leader hands out ``assignments``; everyone gets their own."""
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return ErrorCode.unknown_member_id, b""
        if generation != group.generation:
            return ErrorCode.illegal_generation, b""
        if group.rebalancing:
            return ErrorCode.rebalance_in_progress, b""
        group.members[member_id].last_seen = time.monotonic()
        if member_id == group.leader:
            if not self._assign(group, assignments):
                return self._refuse("max_group_state_bytes", group_id), b""
            group.synced.set()
        else:
            try:
                await asyncio.wait_for(group.synced.wait(), SYNC_WAIT)
            except TimeoutError:
                return ErrorCode.rebalance_in_progress, b""
        if generation != group.generation or member_id not in group.members:
            return ErrorCode.rebalance_in_progress, b""
        return ErrorCode.none, group.members[member_id].assignment

    def _assign(self, group: GroupState, assignments: dict[str, bytes]) -> bool:
        """Hand the leader's assignments to the members, unless they would take the held
        bytes past the limit (then nothing changes)."""
        given = {mid: data for mid, data in assignments.items() if mid in group.members}
        grown = sum(len(data) - len(group.members[mid].assignment) for mid, data in given.items())
        if self.held_bytes + grown > self.limits.max_state_bytes:
            return False
        for mid, data in given.items():
            group.members[mid].assignment = data
        self.held_bytes += grown
        return True

    def heartbeat(self, group_id: str, generation: int, member_id: str) -> ErrorCode:
        """Heartbeat: keeps the member's session; tells it when to rejoin."""
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return ErrorCode.unknown_member_id
        group.members[member_id].last_seen = time.monotonic()
        if group.rebalancing:
            return ErrorCode.rebalance_in_progress
        if generation != group.generation:
            return ErrorCode.illegal_generation
        return ErrorCode.none

    def leave(self, group_id: str, member_id: str) -> ErrorCode:
        """LeaveGroup: the member goes; the others rebalance."""
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return ErrorCode.unknown_member_id
        self._drop(group, member_id)
        self._after_removal(group)
        return ErrorCode.none

    def _after_removal(self, group: GroupState) -> None:
        if not group.members:
            group.generation += 1  # an empty group: the old generation's commits are stale
            group.rebalancing = False
            group.leader = ""
        elif not group.rebalancing:
            self._start_rebalance(group)
        else:
            self._maybe_complete(group)

    def check_commit(self, group_id: str, generation: int, member_id: str) -> ErrorCode:
        """Whether an OffsetCommit may be applied: generation -1 is a commit of a consumer
        that assigns partitions itself (no membership); others must be current members."""
        if generation < 0:
            return ErrorCode.none
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return ErrorCode.unknown_member_id
        if generation != group.generation:
            return ErrorCode.illegal_generation
        return ErrorCode.none

    def sweep(self) -> None:
        """Evict members whose session timed out (called once a second)."""
        now = time.monotonic()
        for group in list(self.groups.values()):
            gone = [m for m in group.members.values() if now - m.last_seen > m.session_s
                    and m.member_id not in group.joiners]
            for member in gone:
                self._drop(group, member.member_id)
            if gone:
                self._after_removal(group)
            if not group.members and not group.joiners:
                del self.groups[group.group_id]
        self._log.flush()

    def clear(self) -> None:
        """This peer stopped leading: membership lives on at the next leader's listener."""
        for group in self.groups.values():
            for future in group.joiners.values():
                future.cancel()
        self.groups.clear()
        self.members = self.held_bytes = 0
        self._log.flush()


def assignments_of(request: Any) -> dict[str, bytes]:
    """SyncGroup's assignments as a map."""
    return {a.member_id: bytes(a.assignment) for a in request.assignments}
