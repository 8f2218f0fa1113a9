"""The group read requests (``GD``, ``GL``, ``GQ``) answered by the topic state machine from
its applied group state (``raftlog.topics.requests`` routes them here)."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from typing import Final, Protocol

from raftlog.errors import TopicError
from raftlog.topics.groups import wire
from raftlog.topics.groups.host import GroupHost
from raftlog.topics.reads import READ_BUDGET
from raftlog.topics.records import records_within

LEASED_BUDGET: Final = READ_BUDGET
"""Record bytes one ``GQ`` answer holds at most (a larger record alone): a topic read's."""


class GroupQueries(Protocol):
    """What the answers read of the topic state machine."""

    @property
    def groups(self) -> GroupHost:
        ...

    @property
    def last_applied(self) -> int:
        ...

    @property
    def last_time(self) -> int:
        ...


def _describe(machine: GroupQueries, args: Sequence[bytes]) -> list[bytes]:
    name = wire.decode_name_request(args)
    host = machine.groups
    return wire.encode_info(host.table.info(name, machine.last_applied, host.source))


def _list(machine: GroupQueries, args: Sequence[bytes]) -> list[bytes]:
    patterns = wire.decode_list_request(args)  # the consume right of a CURVE key (the guard)
    table = machine.groups.table
    return table.names.list_answer(table.groups, patterns, wire.encode_list_response)


def _leased(machine: GroupQueries, args: Sequence[bytes]) -> list[bytes]:
    """``GQ``: the records leased to the member after the request's cursor, at most
    ``limit`` of them and :data:`LEASED_BUDGET` of record bytes (the first one always), read
    only as far as that. Why a byte bound: a member may hold a thousand leases of records up
    to 10 MiB; one answer of them all took 4 s of the loop (an election) and 677 MiB, and
    passed the answer backlog's limit, so the client was shed and asked again -- every
    peer in turn, for good (``tests/integration/groups/test_large_leases.py``)."""
    req = wire.decode_leased_request(args)
    if machine.last_applied < req.min_applied:
        raise TopicError(
            "NotApplied", f"this peer has applied {machine.last_applied} < {req.min_applied}"
        )
    host = machine.groups
    leased = host.table.leased_to(req.group, req.member)
    if req.topic is not None:
        leased = [item for item in leased if item[0][0] == req.topic]
    if req.after is not None:
        leased = leased[bisect.bisect_right(leased, req.after, key=lambda item: item[0]):]
    wanted = leased[: req.limit]
    items, _cut = records_within(
        host.source.iter_records([key for key, _ in wanted], machine.last_time), LEASED_BUDGET)
    out = [
        wire.LeasedRecord(topic, rid, lease.deliveries, lease.deadline_ms, item)
        for ((topic, rid), lease), item in zip(wanted, items, strict=False)
    ]
    return wire.encode_leased_response(machine.last_applied, out, len(out) < len(leased))


GROUP_ANSWERS: Final[Mapping[bytes, Callable[[GroupQueries, Sequence[bytes]], list[bytes]]]] = {
    wire.TYPE_GROUP_DESCRIBE: _describe,
    wire.TYPE_GROUP_LIST: _list,
    wire.TYPE_GROUP_LEASED: _leased,
}
