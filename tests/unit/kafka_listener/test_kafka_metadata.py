"""Metadata answers for every topic are kept encoded (``raftlog.kafka.admin.metadata``): the
same bytes a fresh encoding gives, answered again while nothing they depend on changed, and
encoded again when the topic list, the leader, the version or the client's reading rights
do."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from kio.static.constants import EntityType

from raftlog.kafka import admin, metadata_encoding
from raftlog.kafka.protocol import EncodedPayload, Request, encode_response
from raftlog.security.policy import Principal, Role, TopicFilter


class FakeTopics:
    """The cluster client's topic list, counted."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.calls = 0

    async def list_topics(self, *, url: str | None = None) -> tuple[str, ...]:
        self.calls += 1
        return tuple(sorted(self.names))


class FakeContext:
    """What ``metadata`` reads of ``KafkaContext``; ``allowed`` as the real one's rule."""

    def __init__(self, names: list[str], *, secure: bool = False) -> None:
        self.gateway = SimpleNamespace(topics=FakeTopics(names))
        self.own_url = "tcp://127.0.0.1:1"
        self.secure = secure
        self.settings = SimpleNamespace(auto_create_topics=False)
        self.brokers = (SimpleNamespace(node_id=1, host="127.0.0.1", port=9092),)
        self.cluster_id = "c"
        self.leader = 1
        self.kept_metadata: dict[object, Any] = {}

    def leader_node(self) -> int:
        return self.leader

    def allowed(self, who: Principal | None, role: Role, *, read: str | None = None) -> bool:
        if not self.secure:
            return True
        if who is None or who.role is None or who.role < role:
            return False
        return read is None or who.read.allows(read)


def ask(ctx: FakeContext, version: int, topics: list[str] | None = None,
        who: Principal | None = None) -> Any:
    body = SimpleNamespace(
        topics=None if topics is None else [SimpleNamespace(name=t) for t in topics],
        allow_auto_topic_creation=False,
    )
    req = Request(3, version, 7, "test", body, who=who)
    return asyncio.run(admin.metadata(ctx, req))  # type: ignore[arg-type]


def kio_answer(ctx: FakeContext, version: int, names: list[str]) -> Any:
    """The same answer built and encoded by kio alone."""
    schema = load_payload_module(3, version, EntityType.response)
    partitions = admin._partitions(ctx, schema, ctx.leader)  # type: ignore[arg-type]
    topics = tuple(admin._topic(schema, n, ErrorCode.none, partitions) for n in names)
    return admin._response(ctx, schema, ctx.leader, topics)  # type: ignore[arg-type]


@pytest.mark.parametrize("version", range(1, 13))
@pytest.mark.parametrize("leader", [2, -1])
@pytest.mark.parametrize("layout", ["known", "unknown"])
def test_the_spliced_encoding_is_kios_byte_for_byte(
    version: int, leader: int, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every version the listener speaks, with and without a leader, names of every length
    class (empty list, non-ASCII, 127/128 bytes: a varint's second byte); with a layout
    the splice does not know (no field known after ``topics``) kio encodes it all -- the
    same bytes either way."""
    if layout == "unknown":
        monkeypatch.setattr(metadata_encoding, "_AFTER_TOPICS", {})
    else:  # the splice, not kio's whole encoding

        def whole(payload: Any) -> None:
            raise AssertionError("the known layout fell back to kio's whole encoding")

        monkeypatch.setattr(metadata_encoding.EncodedPayload, "of", whole)
    ctx = FakeContext([])
    ctx.leader = leader
    schema = load_payload_module(3, version, EntityType.response)
    for names in ([], ["a"], ["été", "日本", "x" * 127, "y" * 128, "z" * 249]):
        partitions = admin._partitions(ctx, schema, leader)  # type: ignore[arg-type]
        entry = admin._topic(schema, "", ErrorCode.none, partitions)
        shell = admin._response(ctx, schema, leader, ())  # type: ignore[arg-type]
        spliced = metadata_encoding.encode_every_topic(shell, entry, names)
        ctx.gateway.topics.names = names
        assert encode_response(9, spliced) == encode_response(9, kio_answer(ctx, version, names))


def decoded(version: int, frame: bytes) -> Any:
    """The MetadataResponse a client reads from the answer frame."""
    module = load_payload_module(3, version, EntityType.response)
    cls = module.MetadataResponse
    header, used = entity_reader(cls.__header_schema__)(frame[4:], 0)
    assert header.correlation_id == 7
    return entity_reader(cls)(frame[4:], used)[0]


@pytest.mark.parametrize("version", [1, 9, 12])
def test_kept_answers_are_fresh_encodings_until_something_changes(version: int) -> None:
    ctx = FakeContext(["b", "a"])
    first = ask(ctx, version)
    assert isinstance(first, EncodedPayload)
    assert encode_response(7, first) == encode_response(7, kio_answer(ctx, version, ["a", "b"]))
    assert [t.name for t in decoded(version, encode_response(7, first)).topics] == ["a", "b"]
    assert ask(ctx, version) is first  # nothing changed: the kept encoding
    ctx.gateway.topics.names.append("c")
    third = ask(ctx, version)
    assert third is not first
    assert [t.name for t in decoded(version, encode_response(7, third)).topics] == ["a", "b", "c"]
    ctx.leader = -1  # no leader known: every partition says LEADER_NOT_AVAILABLE
    fourth = decoded(version, encode_response(7, ask(ctx, version)))
    assert {p.error_code.value for t in fourth.topics for p in t.partitions} == {5}
    named = ask(ctx, version, ["a", "zz"])  # named topics: built for the request
    assert not isinstance(named, EncodedPayload)
    assert [t.error_code.value for t in named.topics] == [0, 3]
    assert ctx.gateway.topics.calls == 5  # asked every time: it is what changes


def test_reading_rights_choose_the_kept_answer() -> None:
    ctx = FakeContext(["pay.eu", "pay.us", "logs"], secure=True)
    payments = Principal("p", role=Role.READER, read=TopicFilter(prefixes=("pay.",)))
    everything = Principal("e", role=Role.READER)

    def names(who: Principal) -> list[str]:
        return [t.name for t in decoded(12, encode_response(7, ask(ctx, 12, who=who))).topics]

    assert names(payments) == ["pay.eu", "pay.us"]
    assert names(everything) == ["logs", "pay.eu", "pay.us"]
    assert names(payments) == ["pay.eu", "pay.us"]  # each its own kept answer
    assert len(ctx.kept_metadata) == 2
