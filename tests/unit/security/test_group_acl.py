"""Consumer-group rights of a client key (issue #27): admin for definitions, consume on the
group plus read on the topics for consuming, the read filter written into leases."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from raftlog.errors import TopicError
from raftlog.registry import BY_TYPE, AclScope
from raftlog.security.group_acl import command_refusal, request_refusal, with_read_filter
from raftlog.security.guard import stamp_principal, topic_refusal
from raftlog.security.policy import Principal, Role, TopicFilter, load_clients, token_digest
from raftlog.topics.groups.client import group_data
from raftlog.topics.groups.entry import GroupCommand
from raftlog.topics.groups.requests import GROUP_ANSWERS
from raftlog.topics.groups.wire import (
    TYPE_GROUP_DESCRIBE,
    TYPE_GROUP_LEASED,
    TYPE_GROUP_LIST,
    LeasedRequest,
    decode_list_response,
    encode_leased_request,
)
from raftlog.topics.names import SortedNames
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


class _Groups:
    """The part of the topic state machine a ``GL`` answer reads."""

    def __init__(self, names: list[str]) -> None:
        table = SimpleNamespace(groups=dict.fromkeys(names), names=SortedNames())
        self.groups = SimpleNamespace(table=table)
        self.last_applied = self.last_time = 1


def listed(principal: Principal | None, names: list[str]) -> list[str]:
    """``GL`` through the guard's rewrite (None: a plaintext cluster), then answered."""
    frames = [b"r", b"m", TYPE_GROUP_LIST, b"ident"]
    if principal is not None:
        stamp_principal(principal, TYPE_GROUP_LIST, frames)
    answer = GROUP_ANSWERS[TYPE_GROUP_LIST](_Groups(names), frames[4:])  # type: ignore[arg-type]
    return list(decode_list_response(answer))


def test_a_group_listing_holds_only_the_groups_the_key_may_consume() -> None:
    names = ["audit", "billing-1", "billing-2", "workers"]  # GL answers sorted
    assert listed(None, names) == names
    assert listed(client(), names) == names  # unrestricted consume right
    assert listed(client(consume=["billing-*", "audit"]), names) == names[:3]
    assert listed(client(Role.READER, consume=[]), names) == []
    assert listed(client(Role.ADMIN, consume=["audit"]), names) == names  # admin sees all
    with pytest.raises(TopicError, match="GL takes no frame or one"):
        GROUP_ANSWERS[TYPE_GROUP_LIST](_Groups(names), [b"{}"])  # type: ignore[arg-type]


def test_a_clients_file_may_give_a_key_its_consume_right(tmp_path: Path) -> None:
    """Regression: ``consume`` was parsed but refused as an unknown field of clients.toml."""
    (tmp_path / "clients.toml").write_text(
        "[[clients]]\nname = 'w'\nrole = 'writer'\ntoken_sha256 = "
        f"'{token_digest('t')}'\nconsume = ['workers', 'billing-*']\n"
    )
    allowed = load_clients(tmp_path / "clients.toml", tmp_path)
    consume = allowed.clients[0].consume
    assert consume.allows("workers") and consume.allows("billing-7")
    assert not consume.allows("audit")
