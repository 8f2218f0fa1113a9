"""The group read requests (``GD``, ``GL``, ``GQ``) answered by the topic state machine from
its applied group state (``raftlog.topics.requests`` routes them here)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final, Protocol

from raftlog.errors import TopicError
from raftlog.topics.groups import wire
from raftlog.topics.groups.host import GroupHost
from raftlog.topics.wire import topic_matches


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
    patterns = wire.decode_list_request(args)
    names = list(machine.groups.table.groups)
    if patterns is not None:  # the consume right of a CURVE key (the request guard)
        names = [n for n in names if topic_matches(patterns, n)]
    return wire.encode_list_response(names)


def _leased(machine: GroupQueries, args: Sequence[bytes]) -> list[bytes]:
    req = wire.decode_leased_request(args)
    if machine.last_applied < req.min_applied:
        raise TopicError(
            "NotApplied", f"this peer has applied {machine.last_applied} < {req.min_applied}"
        )
    host = machine.groups
    leased = host.table.leased_to(req.group, req.member)[: req.limit]
    items = host.source.read_records([key for key, _ in leased], machine.last_time)
    out = [
        wire.LeasedRecord(topic, rid, lease.deliveries, lease.deadline_ms, item)
        for ((topic, rid), lease), item in zip(leased, items, strict=True)
    ]
    return wire.encode_leased_response(machine.last_applied, out)


GROUP_ANSWERS: Final[Mapping[bytes, Callable[[GroupQueries, Sequence[bytes]], list[bytes]]]] = {
    wire.TYPE_GROUP_DESCRIBE: _describe,
    wire.TYPE_GROUP_LIST: _list,
    wire.TYPE_GROUP_LEASED: _leased,
}
