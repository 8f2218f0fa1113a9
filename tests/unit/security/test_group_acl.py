"""Consumer-group rights of a client key (issue #27): admin for definitions, consume on the
group plus read on the topics for consuming, the read filter written into leases."""

from __future__ import annotations

from raftlog.registry import BY_TYPE, AclScope
from raftlog.security.group_acl import command_refusal, request_refusal, with_read_filter
from raftlog.security.guard import stamp_principal, topic_refusal
from raftlog.security.policy import Principal, Role, TopicFilter
from raftlog.topics.groups.client import group_data
from raftlog.topics.groups.entry import GroupCommand
from raftlog.topics.groups.wire import (
    TYPE_GROUP_DESCRIBE,
    TYPE_GROUP_LEASED,
    LeasedRequest,
    encode_leased_request,
)
from raftlog.topics.records_tx import decode_any_entry
from raftlog.topics.wire import TYPE_PUBLISH


def client(role: Role = Role.WRITER, read: list[str] | None = None,
           consume: list[str] | None = None) -> Principal:
    return Principal(name="c", role=role, read=TopicFilter.parse(read, "read"),
                     consume=TopicFilter.parse(consume, "consume"))


def command(op: str, args: dict[str, object] | None = None) -> GroupCommand:
    entry = decode_any_entry(group_data(op, "workers", args))  # type: ignore[arg-type]
    assert isinstance(entry, GroupCommand)
    return entry


def test_definitions_need_admin() -> None:
    create = command("create", {"mode": "queue", "topics": ["jobs"]})
    assert "needs role admin" in (command_refusal(client(), create) or "")
    assert command_refusal(client(Role.ADMIN), create) is None
    assert "needs role admin" in (command_refusal(client(), command("delete")) or "")
    assert "leader's" in (command_refusal(client(Role.ADMIN), command("dead", {
        "ids": [["jobs", 1, 0]]})) or "")


def test_consuming_needs_the_group_and_the_topics() -> None:
    ack = command("ack", {"member": "m", "ids": [["jobs", 1, 0]]})
    assert command_refusal(client(), ack) is None
    assert "may not consume" in (command_refusal(client(consume=["other"]), ack) or "")
    assert "may not read topic 'jobs'" in (command_refusal(client(read=["orders"]), ack) or "")
    commit = command("commit", {"topic": "jobs", "next": [3, 0]})
    assert command_refusal(client(consume=["work*"], read=["jobs"]), commit) is None
    # through the guard: TP carries the command
    frames = [group_data("nack", "workers", {"member": "m", "ids": [["jobs", 1, 0]]})]
    assert topic_refusal(client(read=["orders"]), TYPE_PUBLISH, frames) is not None


def test_group_reads_need_the_consume_right() -> None:
    assert BY_TYPE[TYPE_GROUP_DESCRIBE].acl is AclScope.GROUP
    limited = client(Role.READER, consume=["billing-*"])
    assert request_refusal(limited, TYPE_GROUP_DESCRIBE, [b"workers"]) is not None
    assert request_refusal(limited, TYPE_GROUP_DESCRIBE, [b"billing-1"]) is None
    leased = encode_leased_request(LeasedRequest("workers", "m"))
    assert topic_refusal(limited, TYPE_GROUP_LEASED, leased) is not None


def test_a_lease_carries_the_key_read_filter() -> None:
    data = group_data("lease", "workers", {"member": "m", "max": 5})
    assert with_read_filter(client(), data) == data  # unrestricted: unchanged
    frames = [b"r", b"m", TYPE_PUBLISH, b"ident", data]
    stamp_principal(client(read=["jobs", "pay.*"]), TYPE_PUBLISH, frames)
    entry = decode_any_entry(frames[4])
    assert isinstance(entry, GroupCommand) and entry.args["read"] == ["jobs", "pay.*"]
