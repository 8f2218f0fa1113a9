"""The leader's gate (raftlog.server.topics_hook) with a stub peer: what gets proposed, what
gets refused and how, and that a known request id always passes (idempotency first)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from raftlog.entry import LogEntry
from raftlog.options import RaftOptions
from raftlog.records import (
    Record,
    RecordBatch,
    TopicCommand,
    decode_entry,
    encode_command,
    encode_records,
)
from raftlog.rpc import topics as rpc
from raftlog.rpc.messages import RequestUpdate
from raftlog.server.topics_hook import TopicPublishHook
from raftlog.statemachine.topics import TopicStateMachine
from raftlog.storage.memory import MemoryLogStore

RID = b"\x07" * 12


class StubNode:
    def __init__(self, machine: TopicStateMachine, store: MemoryLogStore) -> None:
        self.core = SimpleNamespace(is_leader=True)
        self.store = store
        self.settings = SimpleNamespace(options=RaftOptions(max_log_entry_data_size=200))
        self.stats: Counter[str] = Counter()
        self.log = SimpleNamespace(info=lambda *a, **k: None)
        self.machine = machine
        self.replies: list[tuple[bytes, list[bytes]]] = []
        self.proposed: list[RequestUpdate] = []
        self.clients = SimpleNamespace(
            request_update=lambda routing, msg, applied, **_: self.proposed.append(msg)
        )

    def reply(self, routing: bytes, frames: list[bytes]) -> None:
        self.replies.append((routing, frames))


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[StubNode, TopicPublishHook]]:
    store = MemoryLogStore()
    machine = TopicStateMachine(tmp_path / "t", store)
    create = encode_command(TopicCommand("create", "t", {"max_bytes": 10}))
    store.append(1, [LogEntry(b"\x01" * 12, 0, 1, create)])
    machine.apply(1, store.raw_entries(1, 2), 1)
    node = StubNode(machine, store)
    times = iter([5_000, 4_000, 6_000])
    hook = TopicPublishHook(node, machine, auto_create=False, now_ms=lambda: next(times))  # type: ignore[arg-type]
    yield node, hook
    machine.close()


def test_a_valid_publish_is_stamped_and_proposed_with_its_request_id(setup: Any) -> None:
    node, hook = setup
    data = encode_records([Record("t", b"v")])
    hook.publish(b"r", RID, [data])
    hook.publish(b"r", b"\x08" * 12, [data])  # the wall clock stepped back: stamps do not
    first, second = node.proposed
    assert first.request_id == RID and not node.replies
    one, two = decode_entry(first.data), decode_entry(second.data)
    assert isinstance(one, RecordBatch) and isinstance(two, RecordBatch)
    assert (one.append_time_ms, two.append_time_ms) == (5_000, 5_000)
    assert one.records == (Record("t", b"v"),) and not one.auto_create


@pytest.mark.parametrize(
    ("args", "msg_id", "code"),
    [
        ([encode_records([Record("nosuch", b"v")])], RID, "UnknownTopic"),
        ([encode_records([Record("t", b"x" * 11)])], RID, "RecordTooLarge"),
        ([encode_command(TopicCommand("create", "t"))], RID, "TopicExists"),
        ([encode_command(TopicCommand("delete", "u"))], RID, "UnknownTopic"),
        ([b"\xc1RLT\x01\x01\x00" + bytes(8) + b"\x93"], RID, "BadRecord"),
        ([b"plain data"], RID, "BadRequest"),
        ([], RID, "BadRequest"),
        ([encode_records([Record("t", b"v")])], b"\x01", "BadRequest"),
        ([encode_records([Record("t", b"v" * 10, b"k" * 200)])], RID, "EntryTooLarge"),
    ],
)
def test_refused_publishes_are_answered_and_never_proposed(
    setup: Any, args: list[bytes], msg_id: bytes, code: str
) -> None:
    node, hook = setup
    hook.publish(b"r", msg_id, args)
    assert not node.proposed
    (routing, frames), *_ = node.replies
    assert routing == b"r" and frames[0] == msg_id
    reply = rpc.decode_publish_reply(frames[1:])
    assert reply.status == "rejected" and reply.error is not None and reply.error.name == code
    assert node.stats["topic_publish_refused"] == 1


def test_request_update_path_stamps_or_ignores(setup: Any) -> None:
    node, hook = setup
    plain = RequestUpdate(RID, b"not a topic entry")
    assert hook.request_update(plain) is plain  # untouched, not even copied
    good = hook.request_update(RequestUpdate(RID, encode_records([Record("t", b"v")])))
    assert good is not None and decode_entry(good.data).append_time_ms == 5_000  # type: ignore[union-attr]
    assert hook.request_update(RequestUpdate(RID, encode_records([Record("u", b"v")]))) is None
    assert not node.replies and node.stats["topic_publish_refused"] == 1


def test_followers_and_known_request_ids_pass_through_unchecked(setup: Any) -> None:
    node, hook = setup
    refused = encode_records([Record("nosuch", b"v")])
    node.store.append(2, [LogEntry(RID, 0, 1, b"x")])  # this request id is already in the log
    hook.publish(b"r", RID, [refused])
    assert [m.data for m in node.proposed] == [refused]  # the core will answer its index
    node.core.is_leader = False
    other = b"\x09" * 12
    hook.publish(b"r", other, [refused])  # the core will answer "not leader"
    assert node.proposed[-1] == RequestUpdate(other, refused) and not node.replies


def test_auto_create_flag_follows_the_leader_option(setup: Any) -> None:
    node, _ = setup
    hook = TopicPublishHook(node, node.machine, auto_create=True, now_ms=lambda: 1)
    hook.publish(b"r", RID, [encode_records([Record("fresh", b"v")])])
    entry = decode_entry(node.proposed[0].data)
    assert isinstance(entry, RecordBatch) and entry.auto_create
