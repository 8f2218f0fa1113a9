"""The worked example of issue #26: a ``description`` topic property end to end -- the admin
command, the state machine, its stored state and snapshot, the ``TD`` answer, the REST body
and schema, the clients and the CLI -- added by one field in ``raftlog/topics/records.py``
plus the CLI option."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftlog.cli.admin_parser import build_parser
from raftlog.cli.admin_topics import property_lines
from raftlog.entry import EntryType, LogEntry
from raftlog.errors import TopicError
from raftlog.rest.openapi import openapi_document
from raftlog.rest.topic_routes import describe_body, parse_properties
from raftlog.statemachine.composite import CompositeStateMachine
from raftlog.storage.memory import MemoryLogStore
from raftlog.storage.memory_snapshot import MemorySnapshotStore
from raftlog.topics import wire
from raftlog.topics.client import admin_data
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.record_decode import decode_entry
from raftlog.topics.records import (
    MAX_PROPERTY_TEXT,
    PROPERTY_KINDS,
    TopicCommand,
    TopicProperties,
    encode_command,
)
from raftlog.topics.snapshot import parse_snapshot, snapshot_part
from raftlog.web.errors import RestError

TEXT = "orders of the shop, one record per order (owner: team-shop) — ü"


def append(store: MemoryLogStore, data: bytes) -> int:
    index = store.last_index + 1
    store.append(index, [LogEntry(index.to_bytes(12, "big"), EntryType.STATE, 1, data)])
    return index


def test_the_property_is_one_field_of_kind_text() -> None:
    assert PROPERTY_KINDS["description"] == "text"
    assert TopicProperties(description="x").as_dict()["description"] == "x"


def test_the_admin_command_carries_and_checks_it() -> None:
    data = admin_data("create", "orders", {"description": TEXT, "retention_ms": 5})
    entry = decode_entry(data)
    assert isinstance(entry, TopicCommand)
    assert entry.properties == {"description": TEXT, "retention_ms": 5}
    for bad in (5, b"bytes", "x" * (MAX_PROPERTY_TEXT + 1)):
        with pytest.raises(TopicError, match=r"InvalidProperty|text"):
            encode_command(TopicCommand("create", "t", {"description": bad}))


def test_machine_describe_snapshot_and_restore_keep_it(tmp_path: Path) -> None:
    store = MemoryLogStore()
    created = append(store, admin_data("create", "orders", {"description": TEXT}))
    machine = TopicStateMachine(tmp_path / "a", store)
    machine.apply(1, store.raw_entries(1, store.last_index + 1), 1)
    info = machine.describe("orders")
    assert info.properties.description == TEXT
    assert wire.decode_describe_response(wire.encode_describe_response(info)) == info

    changed = append(store, admin_data("update", "orders", {"description": "renamed"}))
    machine.apply(changed, store.raw_entries(changed, changed + 1), 1)
    assert machine.describe("orders").properties.description == "renamed"
    assert machine.describe("orders").properties.retention_ms is None

    topics, _, _, _ = parse_snapshot(machine.snapshot(created))  # as of the create
    assert topics["orders"].properties.description == TEXT
    data = CompositeStateMachine([machine]).snapshot(changed)
    machine.close()
    store.compact(changed, 1)
    snapshots = MemorySnapshotStore()
    snapshots.install(changed, 1, data)
    restored = TopicStateMachine(tmp_path / "b", store)
    restored.catch_up(snapshots, changed)
    assert restored.describe("orders").properties.description == "renamed"
    assert parse_snapshot(snapshot_part(data, "topics"))[0]["orders"].properties == (
        TopicProperties(description="renamed")
    )
    restored.close()


def test_rest_takes_it_as_text_and_shows_it() -> None:
    assert parse_properties({"description": TEXT}, update=False) == {"description": TEXT}
    assert parse_properties({"description": None}, update=True) == {"description": None}
    with pytest.raises(RestError) as info:
        parse_properties({"description": 7}, update=False)
    assert info.value.status == 400 and info.value.code == "InvalidProperty"
    shown = describe_body(
        "default", "orders", wire.TopicInfo("orders", TopicProperties(description=TEXT), 3)
    )
    assert shown["properties"]["description"] == TEXT
    schema = openapi_document()["components"]["schemas"]["Properties"]["properties"]
    assert schema["description"]["type"] == "string"


def test_the_cli_option_and_describe_lines() -> None:
    args = build_parser().parse_args(["topics", "create", "orders", "--description", TEXT])
    assert args.description == TEXT
    lines = dict(property_lines(TopicProperties(retention_ms=5)))
    assert lines["description"] == "-" and lines["max_bytes"] == "unlimited"
    assert dict(property_lines(TopicProperties(description=TEXT)))["description"] == TEXT
