"""Pure pieces of the REST API: namespaces, properties, ids, settings, the OpenAPI
description against the routes the app registers."""

from __future__ import annotations

import pytest

from raftlog.errors import ConfigError, TopicError
from raftlog.rest.app import build_rest_app
from raftlog.rest.bodies import decode_messages, encode_payload, format_id, parse_id
from raftlog.rest.context import RestContext
from raftlog.rest.gateway import ClusterGateway
from raftlog.rest.names import Namespaces
from raftlog.rest.openapi import openapi_document
from raftlog.rest.settings import RestSettings, rest_settings
from raftlog.rest.topic_routes import parse_properties
from raftlog.topics.records import RecordId
from raftlog.web.auth import Authenticator
from raftlog.web.errors import RestError

NS = Namespaces(RestSettings(namespaces=("default", "billing")))


def test_namespaces_map_both_ways_and_every_log_topic_has_one_rest_name() -> None:
    assert NS.log_topic("default", "orders") == "orders"
    assert NS.log_topic("billing", "eu.invoices") == "billing.eu.invoices"
    assert NS.rest_name("orders") == ("default", "orders")
    assert NS.rest_name("billing.eu.invoices") == ("billing", "eu.invoices")
    assert NS.rest_name("hr.salaries") is None  # not a configured namespace
    assert NS.rest_name("default.x") is None  # would alias default's "x"
    assert NS.topics_of("billing", ("a", "billing.b", "billing.c.d", "hr.x")) == ["b", "c.d"]
    with pytest.raises(RestError, match="NamespaceNotFound"):
        NS.log_topic("hr", "x")
    with pytest.raises(RestError, match="cannot contain"):
        NS.log_topic("default", "billing.b")
    with pytest.raises(TopicError, match="InvalidTopicName"):
        NS.log_topic("billing", "bad name")


def test_properties_accept_cdap_strings_and_ttl_seconds() -> None:
    assert parse_properties({"ttl": "60", "max_bytes": 10}, update=False) == {
        "retention_ms": 60_000, "max_bytes": 10}
    assert parse_properties({"ttl": None}, update=True) == {"retention_ms": None}
    assert parse_properties({"ttl": None}, update=False) == {}
    for bad in ({"ttl": 0}, {"ttl": True}, {"x": 1}, {"ttl": 1, "retention_ms": 1},
                {"max_bytes": 2**53}):
        with pytest.raises(RestError) as info:
            parse_properties(bad, update=False)
        assert info.value.status == 400 and info.value.code == "InvalidProperty"


def test_message_ids_and_payload_encodings_round_trip() -> None:
    assert parse_id(format_id(RecordId(12, 3)), "id") == RecordId(12, 3)
    for bad in ("12", "a-1", "-1", "1-", "1-2-3", f"1-{2**32}"):
        with pytest.raises(RestError):
            parse_id(bad, "id")
    assert decode_messages({"messages": ["YQ=="]}) == [b"a"]
    assert decode_messages({"messages": [{"a": 1}], "encoding": "json"}) == [b'{"a":1}']
    assert decode_messages({"messages": ["é"], "encoding": "text"}) == ["é".encode()]
    assert encode_payload(b'{"a":1}', "json") == {"payload": {"a": 1}}
    assert encode_payload(b"\xff", "text") == {"payloadBase64": "/w=="}
    assert encode_payload(b"a", "base64") == {"payload": "YQ=="}


def test_rest_settings_validate_the_table() -> None:
    assert rest_settings({}, "f").namespaces == ("default",)
    got = rest_settings({"rest": {"namespaces": ["billing"], "max_body_bytes": 10}}, "f")
    assert got.namespaces == ("default", "billing") and got.max_body_bytes == 10
    assert got.body_memory_bytes == 64 * 1024 * 1024  # the default
    assert rest_settings({"rest": {"body_memory_bytes": 5}}, "f").body_memory_bytes == 5
    for bad in ({"namespaces": ["a.b"]}, {"max_body_bytes": 0}, {"colour": 1},
                {"request_timeout_ms": -1}, {"body_memory_bytes": 0},
                {"namespaces": "x"}):
        with pytest.raises(ConfigError, match=r"\[rest\]"):
            rest_settings({"rest": bad}, "f")


def test_openapi_describes_exactly_the_registered_routes() -> None:
    gateway = ClusterGateway(["tcp://127.0.0.1:1"], "tcp://127.0.0.1:1", "x",
                             max_entry_size=1000)
    ctx = RestContext(gateway, Authenticator(None), NS, RestSettings())
    app = build_rest_app(ctx)
    registered = {
        ("/v1" + route.resource.canonical, route.method.lower())
        for route in app.router.routes()
        if route.method != "HEAD" and route.resource is not None
    }
    described = {
        (path, method)
        for path, item in openapi_document()["paths"].items()
        for method in item
        if method != "parameters"
    }
    assert registered == described
