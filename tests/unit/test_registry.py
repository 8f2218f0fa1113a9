"""The message registry (``raftlog.registry``): one row per request type, and every table
derived from it agrees with it (issue #26).

Regenerate the docs table after changing a row:
``.venv/bin/python -c "from raftlog.registry import permission_table; print(permission_table())"``
and paste it between the markers in ``docs/security.md``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from raftlog.errors import LocalProtocolError
from raftlog.registry import BY_TYPE, ROWS, AclScope, MessageRow, Permission, permission_table
from raftlog.rpc import admin, clock, messages
from raftlog.rpc.codec import CORE_TYPES, REQUEST_DECODERS, decode_request_args, dispatch_decoder
from raftlog.rpc.messages import ClientDispatch
from raftlog.security.guard import topic_refusal
from raftlog.security.policy import Principal, Role, TopicFilter, needed_permission
from raftlog.server.client_service import ClientService
from raftlog.server.consistent_reads import ConsistentReads
from raftlog.server.info_service import InfoService
from raftlog.server.leadership_service import LeadershipService
from raftlog.server.peer_service import PeerService
from raftlog.server.services import handler_table, queue_flushes
from raftlog.topics import wire, wire_counts, wire_tx
from raftlog.topics.wire_counts import TYPE_COUNTS, CountsRequest, encode_counts_request

ROOT = Path(__file__).resolve().parents[2]
TYPE_MODULES: tuple[ModuleType, ...] = (messages, admin, clock, wire, wire_counts, wire_tx)
"""Where request type constants (``TYPE_*``) are declared."""

SERVICES = {
    "peers": PeerService,
    "clients": ClientService,
    "info": InfoService,
    "leadership": LeadershipService,
    "entries": SimpleNamespace(request_entries=None),
    "clock": SimpleNamespace(reading=None),
    "reads": ConsistentReads,
}
"""The targets ``build_services`` wires, by the name the rows use."""


def declared_types() -> dict[str, bytes]:
    return {
        f"{module.__name__}.{name}": value
        for module in TYPE_MODULES
        for name, value in vars(module).items()
        if name.startswith("TYPE_") and isinstance(value, bytes)
    }


def test_every_declared_request_type_has_a_row() -> None:
    declared = declared_types()
    assert len(declared) >= 20  # the scan sees the constants
    missing = {name for name, code in declared.items() if code not in BY_TYPE}
    assert missing == set()
    assert len(BY_TYPE) == len(ROWS)  # no type registered twice


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_every_row_fills_every_column(row: MessageRow) -> None:
    for column in dataclasses.fields(MessageRow):
        if column.name == "flush":  # the one optional column: most handlers act at once
            continue
        value = getattr(row, column.name)
        assert value not in (None, "", b""), f"{row.name} lacks {column.name}"
    for named in (row.handler, row.flush):
        if named is None:
            continue
        service, _, method = named.partition(".")
        assert service in SERVICES, f"{row.name}: unknown service {service!r}"
        assert callable(getattr(SERVICES[service], method, None)) or hasattr(
            SERVICES[service], method
        ), f"{row.name}: {named} does not exist"


def test_request_update_is_the_one_queueing_type_and_its_queue_is_wired() -> None:
    """A drain's RequestUpdates are proposed as one batch (issue #28); the dispatcher learns
    what flushes them from the registry, and nothing else queues."""
    flushed: list[str] = []

    class Target:
        def __init__(self, name: str) -> None:
            self.name = name

        def __getattr__(self, method: str) -> object:
            return lambda: flushed.append(f"{self.name}.{method}")

    flushes = queue_flushes({name: Target(name) for name in SERVICES})
    assert set(flushes) == {messages.TYPE_REQUEST_UPDATE}
    flushes[messages.TYPE_REQUEST_UPDATE]()
    assert flushed == ["clients.propose_queued"]


def test_a_row_cannot_be_built_without_a_column() -> None:
    with pytest.raises(TypeError):
        MessageRow(b"ZZ", "Z", ClientDispatch, "info.compact", Permission.READ, AclScope.NONE)  # type: ignore[call-arg]


def test_the_message_column_agrees_with_the_codec() -> None:
    """Core types decode to their own class, every other type to ``ClientDispatch``."""
    for row in ROWS:
        if row.code in CORE_TYPES:
            assert row.message is not ClientDispatch, row.name
        else:
            assert row.message is ClientDispatch, row.name
    assert set(BY_TYPE) >= CORE_TYPES


def test_the_decoder_column_agrees_with_the_codec() -> None:
    """``rpc.codec`` (a leaf, which cannot import the registry) decodes every type with the
    function its row names: a core type's own decoder, or a ClientDispatch that keeps the
    frames as they came."""
    assert set(REQUEST_DECODERS) == CORE_TYPES
    request_id, args = b"\x01" * 12, (b"a", b"\x02", b"")
    for row in ROWS:
        if row.code in CORE_TYPES:
            assert row.decoder is REQUEST_DECODERS[row.code], row.name
        else:
            decoded = row.decoder(request_id, args)
            assert decoded == decode_request_args(row.code, request_id, args), row.name
            assert decoded == ClientDispatch(row.code, args), row.name


def test_an_extension_row_cannot_name_a_core_decoder() -> None:
    with pytest.raises(LocalProtocolError):
        dispatch_decoder(messages.TYPE_REQUEST_VOTE)
    with pytest.raises(KeyError):
        REQUEST_DECODERS[TYPE_COUNTS]


def test_the_handler_table_derives_from_the_registry() -> None:
    calls: list[str] = []

    class Target:
        def __init__(self, name: str) -> None:
            self.name = name

        def __getattr__(self, method: str) -> object:
            return lambda routing, msg_id, message: calls.append(f"{self.name}.{method}")

    table = handler_table({name: Target(name) for name in SERVICES})
    assert set(table) == set(BY_TYPE)  # TR, TD, TL, TC, TS routed, not left to the fallback
    for row in ROWS:
        table[row.code](b"r", b"i", row.message.__new__(row.message))
    assert calls == [row.handler for row in ROWS]


def test_the_permission_table_derives_from_the_registry() -> None:
    for row in ROWS:
        assert needed_permission(row.code) is row.permission
    assert needed_permission(b"ZZ") is Permission.ADMIN


def reader(*read: str) -> Principal:
    return Principal(
        name="spark",
        role=Role.READER,
        read=TopicFilter.parse(list(read) or None, "read"),
    )


def test_a_reader_may_ask_for_topic_counts_and_compaction_needs_admin() -> None:
    """Regression (#26): ``TC`` was missing from the permission table, so it needed admin and
    a reader-role Spark job could not plan on a secure cluster."""
    assert reader().refusal(TYPE_COUNTS) is None
    assert reader().refusal(admin.TYPE_COMPACT) is not None
    assert Principal(name="a", role=Role.ADMIN).refusal(admin.TYPE_COMPACT) is None


def test_topic_counts_are_checked_against_the_read_acl() -> None:
    limited = reader("orders")
    ok = encode_counts_request(CountsRequest(1, 10, topics=("orders",)))
    other = encode_counts_request(CountsRequest(1, 10, topics=("orders", "audit")))
    every = encode_counts_request(CountsRequest(1, 10))
    assert topic_refusal(limited, TYPE_COUNTS, ok) is None
    assert "may not read topic 'audit'" in (topic_refusal(limited, TYPE_COUNTS, other) or "")
    assert "name them" in (topic_refusal(limited, TYPE_COUNTS, every) or "")
    assert topic_refusal(reader(), TYPE_COUNTS, every) is None


def test_the_security_doc_lists_every_type_as_the_registry_does() -> None:
    doc = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    start = doc.index("<!-- registry:permissions:start -->\n") + len(
        "<!-- registry:permissions:start -->\n"
    )
    end = doc.index("<!-- registry:permissions:end -->")
    assert doc[start:end] == permission_table(), "regenerate: see this module's docstring"
