"""The OpenAPI 3.0 description served at ``/v1/openapi.json``.

Why hand-built data and not a generator: the API is small, its shapes are CDAP's rather than
a framework's, and a plain dict keeps the description next to nothing but itself; a unit
test checks that every route the app registers is described and vice versa.
"""

from __future__ import annotations

from typing import Any

from raftlog import __version__
from raftlog.topics.records import (
    MAX_PROPERTY_TEXT,
    PROPERTY_CHOICES,
    PROPERTY_KINDS,
    PROPERTY_NAMES,
)

_JSON = "application/json"


def _property_schema(kind: str, name: str = "") -> dict[str, Any]:
    """A topic property's schema by its kind (``raftlog.topics.records.PROPERTY_KINDS``)."""
    if name in PROPERTY_CHOICES:
        return {"type": "string", "enum": list(PROPERTY_CHOICES[name]), "nullable": True}
    if kind == "text":
        return {"type": "string", "maxLength": MAX_PROPERTY_TEXT, "nullable": True}
    return {
        "oneOf": [{"type": "integer", "minimum": 1}, {"type": "string", "pattern": "^[0-9]+$"}],
        "nullable": True,
    }


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _body(schema: dict[str, Any], *, required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {_JSON: {"schema": schema}}}


def _answers(ok: str, ok_schema: dict[str, Any], *errors: int) -> dict[str, Any]:
    out: dict[str, Any] = {"200": {"description": ok, "content": {_JSON: {"schema": ok_schema}}}}
    reasons = {
        400: "bad input (malformed JSON, unknown field, bad property, bad name)",
        401: "no or unknown bearer token (secure clusters)",
        403: "the token's role or topic ACL does not allow this",
        404: "unknown namespace, topic or transaction",
        409: "conflict (topic exists; transaction committed, aborted or expired; an "
        "expectation failed: lastId says where the topic or key is now)",
        410: "the start is below what retention removed (firstAvailable says where to start)",
        413: "the body exceeds [rest] max_body_bytes",
        429: "over the caller's quota (publish rate, long polls); header Retry-After (s), "
        "retryAfterMs and kind in the body; nothing was published",
        503: "the cluster did not answer in time (no leader: Unavailable), the peer is "
        "stopping (ShuttingDown), or large answers or request bodies fill its answer or "
        "body memory (Busy; header Retry-After)",
    }
    for status in (*errors, 401, 403, 503):
        out[str(status)] = {"description": reasons[status],
                            "content": {_JSON: {"schema": _ref("Error")}}}
    return out


def _messages_body(extra: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        **({"required": required} if required else {}),  # OpenAPI 3.0: never an empty list
        "additionalProperties": False,
        "properties": {
            "messages": {"type": "array", "minItems": 1, "items": {},
                         "description": "payloads in `encoding`"},
            "encoding": _ref("Encoding"),
            **extra,
        },
    }


def openapi_document() -> dict[str, Any]:
    """The whole description (a fresh dict each call)."""
    ns = {"name": "ns", "in": "path", "required": True, "schema": {"type": "string"}}
    topic = {"name": "topic", "in": "path", "required": True, "schema": {"type": "string"}}
    txid = {"type": "string", "description": "a transaction id (1-128 of A-Z a-z 0-9 . _ : -)"}
    one = "/v1/namespaces/{ns}/topics/{topic}"
    request_id = {"name": "Raftlog-Request-Id", "in": "header", "required": False,
                  "description": "the client's own request id (24 hex digits, seconds first): "
                  "a retry with the same id is applied at most once",
                  "schema": {"type": "string", "pattern": "^[0-9a-fA-F]{24}$"}}
    paths = _kv_paths(one, ns, topic)
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "raftlog REST API",
            "version": __version__,
            "description": "Topics, messages and transactions of a raftlog cluster, after "
            "CDAP's transactional messaging service (docs/rest.md). Every peer serves it; "
            "writes are forwarded to the leader, reads are served by the peer asked.",
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {"type": "object", "required": ["error", "message"],
                          "properties": {"error": {"type": "string"},
                                         "message": {"type": "string"},
                                         "firstAvailable": {"type": "string"},
                                         "lastId": {"type": "string", "nullable": True}}},
                "Encoding": {"type": "string", "enum": ["base64", "text", "json"],
                             "default": "base64"},
                "Properties": {
                    "type": "object", "additionalProperties": False,
                    "properties": {
                        name: _property_schema(PROPERTY_KINDS.get(name, "uint"), name)
                        for name in (*PROPERTY_NAMES, "ttl")
                    },
                },
                "MessageId": {"type": "string", "pattern": "^[0-9]+-[0-9]+$",
                              "description": "INDEX-POSITION: the log index and the place "
                              "in its entry"},
                "Message": {"type": "object", "properties": {
                    "id": _ref("MessageId"), "timestamp": {"type": "integer"},
                    "payload": {}, "payloadBase64": {"type": "string"},
                    "deliveries": {"type": "integer", "description": "group polls: 1 on "
                                   "the first delivery, more on a redelivery"}}},
            },
        },
        "security": [{"bearer": []}, {}],
        "paths": {
            "/v1/openapi.json": {"get": {"summary": "this description",
                                         "security": [{}],
                                         "responses": {"200": {"description": "OpenAPI"}}}},
            "/v1/namespaces": {"get": {
                "summary": "configured namespaces ([rest] namespaces)",
                "responses": _answers("names", {"type": "array",
                                                "items": {"type": "string"}})}},
            "/v1/namespaces/{ns}/topics": {"get": {
                "summary": "the namespace's topics the caller may read", "parameters": [ns],
                "responses": _answers("names", {"type": "array", "items": {"type": "string"}},
                                      404)}},
            one: {
                "parameters": [ns, topic],
                "put": {"summary": "create a topic (admin)",
                        "requestBody": _body(_ref("Properties"), required=False),
                        "responses": _answers("created", {"type": "object"}, 400, 404, 409,
                                              413)},
                "get": {"summary": "a topic's properties and bounds",
                        "responses": _answers("the topic", {"type": "object"}, 400, 404)},
                "delete": {"summary": "delete a topic and its messages (admin)",
                           "responses": _answers("deleted", {"type": "object"}, 400, 404)},
            },
            one + "/properties": {"parameters": [ns, topic], "put": {
                "summary": "change the named properties (null removes a limit; admin)",
                "requestBody": _body(_ref("Properties")),
                "responses": _answers("updated", {"type": "object"}, 400, 404, 413)}},
            one + "/publish": {"parameters": [ns, topic, request_id], "post": {
                "summary": "publish messages atomically; with a transaction: store them "
                "(optional) and commit the transaction",
                "requestBody": _body(_messages_body(
                    {"transaction": txid,
                     "ttlMs": {"type": "integer", "minimum": 1,
                               "description": "a shorter life than the topic's retention"},
                     "expectLastId": _expect("only if the topic's last message is this "
                                             "one ('none': only if it has none)")},
                    [])),
                "responses": _answers(
                    "the ids of the published (committed) messages",
                    {"type": "object", "properties": {
                        "ids": {"type": "array", "items": _ref("MessageId"), "nullable": True},
                        "transaction": txid, "commitIndex": {"type": "integer"}}},
                    400, 404, 409, 413, 429)}},
            one + "/store": {"parameters": [ns, topic, request_id], "post": {
                "summary": "store messages under a transaction (invisible until it commits); "
                "without an id a new transaction is begun",
                "requestBody": _body(_messages_body(
                    {"transaction": txid,
                     "timeoutMs": {"type": "integer", "minimum": 1, "maximum": 900000}},
                    ["messages"])),
                "responses": _answers(
                    "stored; the transaction id and its rollback handle",
                    {"type": "object", "properties": {
                        "transaction": txid, "stored": {"type": "integer"},
                        "rollback": {"type": "object", "properties": {"transaction": txid}}}},
                    400, 404, 409, 413, 429)}},
            one + "/rollback": {"parameters": [ns, topic], "post": {
                "summary": "roll a transaction back: none of its messages will be visible",
                "requestBody": _body({"type": "object", "required": ["transaction"],
                                      "properties": {"transaction": txid}}),
                "responses": _answers("rolled back", {"type": "object"}, 400, 404, 409)}},
            one + "/poll": {"parameters": [ns, topic], "post": {
                "summary": "messages from a message id or an append time, from this peer",
                "requestBody": _body({"type": "object", "additionalProperties": False,
                                      "properties": {
                    "startFrom": {"oneOf": [_ref("MessageId"), {"type": "integer"}]},
                    "inclusive": {"type": "boolean", "default": True},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 10000,
                              "default": 1000},
                    "waitMs": {"type": "integer", "minimum": 0,
                               "description": "wait this long for messages if none"},
                    "group": {"type": "string", "description": "consume as a member of "
                              "this consumer group (queue: leases; stream: from its position)"},
                    "member": {"type": "string", "description": "the member name (default "
                               "rest-<principal>)"},
                    "encoding": _ref("Encoding")}}, required=False),
                "responses": _answers("messages (header X-Raftlog-More: true if more)",
                                      {"type": "array", "items": _ref("Message")},
                                      400, 404, 410, 413, 429)}},
            **paths,
            one + "/ack": {"parameters": [ns, topic], "post": {
                "summary": "ack (or nack) a queue group's leased messages, or commit a stream "
                "group's position past the highest id",
                "requestBody": _body({"type": "object", "additionalProperties": False,
                                      "required": ["group", "ids"], "properties": {
                    "group": {"type": "string"}, "member": {"type": "string"},
                    "ids": {"type": "array", "minItems": 1, "items": _ref("MessageId")},
                    "nack": {"type": "boolean", "default": False},
                    "reason": {"type": "string"}}}),
                "responses": _answers("done: the command's log index",
                                      {"type": "object"}, 400, 404, 413)}},
        },
    }


def _expect(what: str) -> dict[str, Any]:
    return {"type": "string", "pattern": "^([0-9]+-[0-9]+|none)$", "nullable": True,
            "description": what}


def _kv_paths(one: str, ns: dict[str, Any], topic: dict[str, Any]) -> dict[str, Any]:
    """The key-value view of compacted topics (``raftlog.rest.kv_routes``, issue #29)."""
    key = {"name": "key", "in": "path", "required": True,
           "schema": {"type": "string", "minLength": 1}}
    revision = {"type": "object", "properties": {"revision": _ref("MessageId")}}
    entry = {"type": "object", "properties": {
        "key": {"type": "string"}, "revision": _ref("MessageId"), "value": {},
        "payload": {}, "payloadBase64": {"type": "string"}}}
    expect = _expect("only if the key's revision is this ('none': only if it has no value)")
    query = {"in": "query", "required": False}
    return {
        one + "/keys": {"parameters": [ns, topic], "get": {
            "summary": "a compacted topic's live keys with a prefix, in byte order",
            "parameters": [
                {"name": "prefix", **query, "schema": {"type": "string"}},
                {"name": "limit", **query,
                 "schema": {"type": "integer", "minimum": 1, "maximum": 10000}}],
            "responses": _answers("keys", {"type": "object", "properties": {
                "keys": {"type": "array", "items": {"type": "object"}},
                "more": {"type": "boolean"}}}, 400, 404)}},
        one + "/keys/{key}": {
            "parameters": [ns, topic, key],
            "get": {"summary": "a key's live value",
                    "parameters": [{"name": "encoding", **query,
                                    "schema": _ref("Encoding")}],
                    "responses": _answers("the value", entry, 400, 404)},
            "put": {"summary": "set a key (a keyed record), optionally only at a revision",
                    "requestBody": _body({
                        "type": "object", "required": ["value"], "additionalProperties": False,
                        "properties": {"value": {}, "encoding": _ref("Encoding"),
                                       "expectRevision": expect}}),
                    "responses": _answers("the new revision", revision, 400, 404, 409, 413,
                                          429)},
            "delete": {"summary": "delete a key (a tombstone)",
                       "parameters": [{"name": "expectRevision", **query, "schema": expect}],
                       "responses": _answers("the deletion's revision", revision, 400, 404,
                                             409, 429)},
        },
        one + "/watch": {"parameters": [ns, topic], "post": {
            "summary": "changes of keys with a prefix from a revision (long-polled)",
            "requestBody": _body({"type": "object", "additionalProperties": False,
                                  "properties": {
                "prefix": {"type": "string"},
                "fromRevision": {"oneOf": [_ref("MessageId"),
                                           {"type": "integer", "minimum": 0}]},
                "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
                "waitMs": {"type": "integer", "minimum": 0},
                "encoding": _ref("Encoding")}}, required=False),
            "responses": _answers("events, and next: where to continue", {
                "type": "object", "properties": {
                    "events": {"type": "array", "items": {"type": "object"}},
                    "next": _ref("MessageId")}}, 400, 404, 410, 429)}},
    }
