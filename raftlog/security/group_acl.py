"""Consumer-group rights of a CURVE client (issue #27), for the request guard.

Group commands travel in ``TP`` like every topic entry (``raftlog.topics.groups.entry``):

* ``create``, ``delete``, ``reset`` change a group's definition or position for everyone:
  role ``admin``;
* ``commit``, ``claim``, ``release``, ``lease``, ``ack``, ``nack`` are consuming: the key's
  ``consume`` right on the group, and ``read`` on every topic they name (the commit's or
  claim's topic, each acked record's);
  a lease names no topic, so the guard writes the key's read filter into it and the group
  leases only records of topics the key may read (decided in the log, so on every peer);
* ``dead`` is the leader's own (the dead-letter mover): members only.

``GD`` and ``GQ`` name a group: the ``consume`` right on it. ``GL`` lists only the groups
the key may consume from (an admin key sees every group): the guard writes the filter in.
"""

from __future__ import annotations

from collections.abc import Sequence

from raftlog.errors import TopicError
from raftlog.security.policy import Principal, Role, TopicFilter
from raftlog.topics.groups.entry import GroupCommand, encode_group_command
from raftlog.topics.groups.wire import (
    TYPE_GROUP_LEASED,
    decode_leased_request,
    decode_name_request,
    encode_list_request,
)
from raftlog.topics.records_tx import decode_any_entry


def read_patterns(acl: TopicFilter) -> list[str]:
    """A read filter as the patterns a lease carries (``name`` or ``prefix*``)."""
    return [*sorted(acl.exact), *(prefix + "*" for prefix in acl.prefixes)]


def command_refusal(principal: Principal, command: GroupCommand) -> str | None:
    """Why ``principal`` may not send ``command`` (None: it may)."""
    if command.op in ("create", "delete", "reset"):
        if principal.role is not None and principal.role >= Role.ADMIN:
            return None
        return f"{principal.name}: group {command.op} needs role admin"
    if command.op == "dead":
        return f"{principal.name}: dead-letter moves are the leader's"
    if not principal.consume.allows(command.group):
        return f"{principal.name} may not consume from group {command.group!r}"
    named = command.op in ("commit", "claim", "release")
    topics = [command.args["topic"]] if named else [
        item[0] for item in command.args.get("ids", [])
    ]
    for topic in topics:
        if not principal.may_read(topic):
            return f"{principal.name} may not read topic {topic!r}"
    return None


def list_filter(principal: Principal) -> list[bytes] | None:
    """The ``GL`` arguments that list only the groups ``principal`` may consume from (None:
    it sees every group -- an unrestricted ``consume`` right, or role admin, which may
    create and delete any group anyway)."""
    if principal.consume.unrestricted:
        return None
    if principal.role is not None and principal.role >= Role.ADMIN:
        return None
    return encode_list_request(read_patterns(principal.consume))


def request_refusal(principal: Principal, msg_type: bytes, args: Sequence[bytes]) -> str | None:
    """``GD`` / ``GQ``: the consume right on the named group (None: allowed, or a request
    the handler will refuse itself)."""
    try:
        if msg_type == TYPE_GROUP_LEASED:
            group = decode_leased_request(args).group
        else:
            group = decode_name_request(args)
    except TopicError:
        return None
    if principal.consume.allows(group):
        return None
    return f"{principal.name} may not consume from group {group!r}"


def with_read_filter(principal: Principal, data: bytes) -> bytes:
    """A lease command with the key's read filter written in (other data: unchanged)."""
    if principal.read.unrestricted:
        return data
    try:
        command = decode_any_entry(data)
    except TopicError:
        return data
    if not isinstance(command, GroupCommand) or command.op != "lease":
        return data
    args = {**command.args, "read": read_patterns(principal.read)}
    return encode_group_command(GroupCommand("lease", command.group, args))
