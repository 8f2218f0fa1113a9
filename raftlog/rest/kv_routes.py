"""The key-value view of compacted topics over REST (issue #29; ``raftlog.topics.kv``).

Under ``/namespaces/{ns}/topics/{topic}``, for a topic created with ``"cleanup_policy":
"compact"``; keys are the URL path segment as UTF-8 text, values in the body's
``encoding`` (``text``, ``json`` or ``base64``, the default, as for messages), revisions are
message ids (``INDEX-POSITION``):

* ``GET …/keys?prefix=P&limit=N`` -> ``{"keys": [{"key", "revision"}], "more"}``: live keys
  in byte order, from this peer's applied state;
* ``GET …/keys/{key}?encoding=E`` -> ``{"key", "revision", "value"}`` (404 ``KeyNotFound``);
* ``PUT …/keys/{key}`` ``{"value", "encoding", "expectRevision"}`` -> ``{"revision"}``;
* ``DELETE …/keys/{key}?expectRevision=R`` -> ``{"revision"}`` (a tombstone);
* ``POST …/watch`` ``{"prefix", "fromRevision", "limit", "waitMs", "encoding"}`` ->
  ``{"events": [{"type": "put"|"delete", "key", "revision", "value"}], "next"}``: changes
  from a revision (a log index, or a message id; inclusive), long-polled like ``poll``;
  ``next`` (a message id) is where the following call starts.

``expectRevision`` (a message id, or ``"none"``: the key must have no value) makes a write
conditional: 409 ``ExpectationFailed`` with ``lastId`` when the key moved on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, Final

from aiohttp import web

from raftlog.rest.bodies import (
    check_fields,
    decode_messages,
    encode_payload,
    encoding_of,
    expected_id,
    format_id,
    json_reply,
    optional_int,
    parse_id,
    read_json_object,
)
from raftlog.rest.context import RestContext
from raftlog.rest.pages import (
    ESCAPE_GROWTH,
    MessageFormat,
    answer_within,
    long_poll,
    own_records_arrive,
)
from raftlog.security.policy import Role
from raftlog.topics.kv import event_of
from raftlog.topics.records import MAX_UINT, LoggedRecord, RecordId
from raftlog.topics.wire_kv import MAX_KEY_BYTES, MAX_KEYS_LIMIT
from raftlog.web.errors import RestError, from_cluster

PUT_FIELDS: Final = frozenset({"value", "encoding", "expectRevision"})
WATCH_FIELDS: Final = frozenset({"prefix", "fromRevision", "limit", "waitMs", "encoding"})
WATCH_LIMIT: Final = 1000


def _key(request: web.Request) -> bytes:
    key = request.match_info["key"].encode()
    if not key or len(key) > MAX_KEY_BYTES:
        raise RestError(400, "BadRequest", f"a key is 1 .. {MAX_KEY_BYTES} bytes")
    return key


def _value(body: dict[str, Any]) -> bytes:
    encoding = encoding_of(body)
    if "value" not in body:
        raise RestError(400, "BadRequest", "value is required")
    return decode_messages({"messages": [body["value"]], "encoding": encoding})[0]


def _entry(item: LoggedRecord, encoding: str) -> dict[str, Any]:
    key = item.record.key or b""
    return {
        "key": key.decode("utf-8", "backslashreplace"),
        "revision": format_id(item.id),
        **encode_payload(item.record.value, encoding),
    }


async def watch_changes(ctx: RestContext, request: web.Request) -> web.Response:
    """``POST …/watch`` (module docstring)."""
    _ns, _topic, name = ctx.names(request)
    who = ctx.auth.require(request, Role.READER, read=name)
    body = await read_json_object(request, ctx.max_body, optional=True)
    check_fields(body, WATCH_FIELDS)
    encoding = encoding_of(body)
    prefix = body.get("prefix", "")
    if not isinstance(prefix, str):
        raise RestError(400, "BadRequest", "prefix must be a string")
    start = body.get("fromRevision", 0)
    if isinstance(start, str):
        next_id = parse_id(start, "fromRevision")
    elif type(start) is int and 0 <= start <= MAX_UINT:
        next_id = RecordId(start, 0)
    else:
        raise RestError(400, "BadRequest", "fromRevision is a log index or a message id")
    limit = optional_int(body, "limit", 1, WATCH_LIMIT) or WATCH_LIMIT
    wait_ms = min(optional_int(body, "waitMs", 0, MAX_UINT) or 0, ctx.settings.max_wait_ms)
    deadline = time.monotonic() + wait_ms / 1000
    timeout = ctx.settings.request_timeout_ms / 1000
    scans = _WatchScan(ctx, name, prefix.encode(), limit, next_id)
    await ctx.answers.reserve_read(request, timeout)  # room for the answer (a poll's)
    start = scans.next_id

    async def read() -> bool:
        nonlocal start
        start = scans.next_id
        return await scans.scan()

    if not await read() and wait_ms:
        await long_poll(ctx, request, who, deadline, wake=scans.wake, read=read)

    async def again() -> tuple[Sequence[LoggedRecord], bool]:
        scans.next_id = start
        await scans.scan()
        return scans.taken()

    page, _more = await answer_within(
        request, ctx.answers, timeout=timeout, first=scans.taken(), read_again=again,
        form=MessageFormat(lambda item: _event(item, encoding),
                           lambda item: len(item.record.value), encoding,
                           lambda item: ESCAPE_GROWTH * len(item.record.key or b"")))
    next_id = scans.next_id
    if page.cut:  # the events left out come in the next watch
        last = page.items[len(page.parts) - 1].id
        next_id = RecordId(last.index, last.position + 1)
    next_json = json.dumps(format_id(next_id)).encode()
    return web.Response(body=b'{"events": ' + page.array()[:-1] + b', "next": ' + next_json
                        + b"}\n", content_type="application/json", charset="utf-8")


class _WatchScan:
    """A watch's reads of its topic from ``next_id``, keeping the changes under its key
    prefix (``found``)."""

    def __init__(self, ctx: RestContext, topic: str, prefix: bytes, limit: int,
                 next_id: RecordId) -> None:
        self._ctx, self._topic, self._prefix, self._limit = ctx, topic, prefix, limit
        self.next_id = next_id
        """Where the next read starts: after the last record read."""
        self.found: list[LoggedRecord] = []

    async def wake(self, wait_ms: int) -> bool:
        """Whether records come from ``next_id`` on within ``wait_ms``, bringing none
        (``raftlog.rest.pages.long_poll``)."""
        return await own_records_arrive(
            self._ctx, self._topic, wait_ms, from_index=self.next_id.index,
            from_position=self.next_id.position)

    async def scan(self) -> bool:
        """Read from ``next_id``; whether records were found."""
        gateway = self._ctx.gateway
        try:
            result = await gateway.topics.read(
                self._topic, from_index=self.next_id.index, from_position=self.next_id.position,
                limit=self._limit, url=gateway.own_url, timeout=gateway.timeout)
        except Exception as exc:
            raise from_cluster(exc) from exc
        for item in result.records:
            self.next_id = RecordId(item.id.index, item.id.position + 1)
            if (item.record.key or b"").startswith(self._prefix):
                self.found.append(item)
        return bool(result.records)

    def taken(self) -> tuple[Sequence[LoggedRecord], bool]:
        """What the scans found, handed over (the caller is its only holder then)."""
        events, self.found = self.found, []
        return events, False


def _event(item: LoggedRecord, encoding: str) -> dict[str, Any]:
    """One change as a watch answers it: a put with its value, or a delete."""
    event = event_of(item)
    if event.kind == "put":
        return {"type": event.kind, **_entry(item, encoding)}
    return {"type": "delete", "key": event.key.decode("utf-8", "backslashreplace"),
            "revision": format_id(item.id)}


def add_kv_routes(app: web.Application, ctx: RestContext) -> None:
    """Register the key-value endpoints (module docstring)."""
    base = "/namespaces/{ns}/topics/{topic}"

    async def list_keys(request: web.Request) -> web.Response:
        _ns, _topic, name = ctx.names(request)
        ctx.auth.require(request, Role.READER, read=name)
        query = dict(request.query)
        raw = query.get("limit", "1000")
        if not raw.isdigit() or not 1 <= int(raw) <= MAX_KEYS_LIMIT:
            raise RestError(400, "BadRequest", f"limit must be an integer in 1 .. {MAX_KEYS_LIMIT}")
        limit = int(raw)
        try:
            found = await ctx.gateway.topics.kv.keys(
                name,
                query.get("prefix", "").encode(),
                url=ctx.gateway.own_url,
                limit=limit + 1,
                timeout=ctx.gateway.timeout,
            )
        except Exception as exc:
            raise from_cluster(exc) from exc
        keys = [
            {"key": k.decode("utf-8", "backslashreplace"), "revision": format_id(r)}
            for k, r in found[:limit]
        ]
        return json_reply({"keys": keys, "more": len(found) > limit})

    async def get(request: web.Request) -> web.Response:
        _ns, _topic, name = ctx.names(request)
        ctx.auth.require(request, Role.READER, read=name)
        key = _key(request)
        encoding = encoding_of(dict(request.query))
        try:
            item = await ctx.gateway.topics.kv.get(
                name, key, url=ctx.gateway.own_url, timeout=ctx.gateway.timeout
            )
        except Exception as exc:
            raise from_cluster(exc) from exc
        if item is None:
            raise RestError(404, "KeyNotFound", f"key {request.match_info['key']!r} has no value")
        return json_reply(_entry(item, encoding))

    async def put(request: web.Request) -> web.Response:
        _ns, _topic, name = ctx.names(request)
        who = ctx.auth.require(request, Role.WRITER, publish=name)
        key = _key(request)
        body = await read_json_object(request, ctx.max_body)
        check_fields(body, PUT_FIELDS)
        value = _value(body)
        ctx.quotas.payloads(request, who, [value])
        expect = expected_id(body, "expectRevision")
        try:
            rid = await ctx.gateway.topics.kv.put(
                name, key, value, expect_revision=expect, timeout=ctx.gateway.timeout
            )
        except Exception as exc:
            raise from_cluster(exc) from exc
        await ctx.gateway.caught_up(rid.index)
        return json_reply({"revision": format_id(rid)})

    async def delete(request: web.Request) -> web.Response:
        _ns, _topic, name = ctx.names(request)
        who = ctx.auth.require(request, Role.WRITER, publish=name)
        key = _key(request)
        ctx.quotas.payloads(request, who, [b""])
        expect = expected_id(dict(request.query), "expectRevision")
        try:
            rid = await ctx.gateway.topics.kv.delete(
                name, key, expect_revision=expect, timeout=ctx.gateway.timeout
            )
        except Exception as exc:
            raise from_cluster(exc) from exc
        await ctx.gateway.caught_up(rid.index)
        return json_reply({"revision": format_id(rid)})

    async def watch(request: web.Request) -> web.Response:
        return await watch_changes(ctx, request)

    app.router.add_get(base + "/keys", list_keys)
    app.router.add_get(base + "/keys/{key}", get)
    app.router.add_put(base + "/keys/{key}", put)
    app.router.add_delete(base + "/keys/{key}", delete)
    app.router.add_post(base + "/watch", watch)
