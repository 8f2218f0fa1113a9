"""Messages: publish and poll (CDAP TMS ``publish`` / ``poll``), transaction-free part.

``POST …/{topic}/publish`` ``{"messages": [...], "encoding": "base64"|"text"|"json"}``
publishes the messages atomically (one log entry) through the leader and answers 200 with
their ids; with ``"expectLastId": "12-0"`` (``"none"``: the topic must be empty) only if
the topic's last message is that one, else 409 ``ExpectationFailed`` with ``lastId``; with
``"transaction"`` it commits a transaction instead (``raftlog.rest.tx_routes``).

``POST …/{topic}/poll`` ``{"startFrom": "12-0" | 1700000000000, "inclusive": true,
"limit": 100, "waitMs": 0, "encoding": "base64"}`` answers a JSON array of
``{"id", "timestamp", "payload"}`` from this peer's applied state. ``startFrom`` is a message
id (a string) or an append time in ms (a number); no ``startFrom`` starts at the oldest
retained message. With ``waitMs`` an empty answer waits up to that long for messages
(``[rest] max_wait_ms`` caps it), so a consumer need not spin: the read becomes a waiting
``TR`` read that this peer holds until it applies a record of the topic (no timer
re-reads); a peer shutting down ends the wait at once (503 ``ShuttingDown``) rather than
holding its exit.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
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
    optional_bool,
    optional_int,
    parse_id,
    read_json_object,
    request_id_of,
)
from raftlog.rest.context import RestContext
from raftlog.rest.group_routes import group_poll
from raftlog.rest.pages import MessageFormat, answer_within, long_poll, own_records_arrive
from raftlog.rpc.reads import Consistency
from raftlog.security.policy import Principal, Role
from raftlog.topics.client import make_record
from raftlog.topics.records import MAX_UINT, LoggedRecord
from raftlog.topics.records_kv import expectations
from raftlog.topics.wire import DEFAULT_READ_LIMIT, MAX_READ_LIMIT, ReadResult
from raftlog.web.errors import RestError, from_cluster

PUBLISH_FIELDS: Final = frozenset(
    {"messages", "encoding", "transaction", "ttlMs", "expectLastId"}
)
POLL_FIELDS: Final = frozenset(
    {"startFrom", "inclusive", "limit", "waitMs", "encoding", "consistency", "minIndex",
     "group", "member"}
)


def _consistency(body: dict[str, Any]) -> tuple[str, int | None]:
    """The poll's read consistency (docs/rest.md; issue #29): ``consistency`` (``any`` by
    default) and ``minIndex``, which ``read_your_writes`` needs -- the gateway serves many
    clients, so it has no session of its own to take the last write from."""
    level = body.get("consistency", "any")
    min_index = optional_int(body, "minIndex", 0, MAX_UINT)
    try:
        parsed = Consistency.parse(level) if isinstance(level, str) else None
    except ValueError as exc:
        raise RestError(400, "BadRequest", str(exc)) from None
    if parsed is None:
        raise RestError(400, "BadRequest", "consistency must be a string")
    if parsed is Consistency.READ_YOUR_WRITES and min_index is None:
        raise RestError(
            400, "BadRequest", "read_your_writes needs minIndex (the index of your write's id)"
        )
    return parsed.value, min_index

TransactionalPublish = Callable[
    [web.Request, RestContext, str, dict[str, Any]], Awaitable[web.Response]
]


async def plain_publish(
    ctx: RestContext, name: str, body: dict[str, Any], request_id: bytes | None,
    charge: Callable[[list[bytes]], None] | None = None,
) -> list[str]:
    """Publish ``body``'s messages to log topic ``name`` in one entry; their ids.
    ``charge(payloads)`` is asked first (the caller's quota: it raises 429)."""
    payloads = decode_messages(body)
    if charge is not None:
        charge(payloads)
    ttl = optional_int(body, "ttlMs", 1, MAX_UINT)
    records = [make_record(name, payload, ttl_ms=ttl) for payload in payloads]
    expect = expected_id(body, "expectLastId")  # issue #29: conditional publish
    conditions = expectations(name, None, expect, None)
    try:
        ids = await ctx.gateway.topics.publish_batch(
            records, request_id=request_id, timeout=ctx.gateway.timeout, expect=conditions
        )
    except Exception as exc:
        raise from_cluster(exc) from exc
    await ctx.gateway.caught_up(ids[0].index)
    return [format_id(rid) for rid in ids]


def _read_args(body: dict[str, Any]) -> dict[str, Any]:
    """A poll's read: where it starts (its ``startFrom``, an id or a time, and
    ``inclusive``) and its ``limit``."""
    start = body.get("startFrom")
    inclusive = optional_bool(body, "inclusive", True)
    limit = optional_int(body, "limit", 1, MAX_READ_LIMIT) or DEFAULT_READ_LIMIT
    if isinstance(start, str):
        rid = parse_id(start, "startFrom")
        return {"from_index": rid.index, "from_position": rid.position, "inclusive": inclusive,
                "limit": limit}
    if type(start) is int and 0 <= start <= MAX_UINT:
        # a time: "at or after" when inclusive, "after" otherwise
        return {"from_time_ms": start if inclusive else start + 1, "inclusive": True,
                "limit": limit}
    if start is not None:
        raise RestError(
            400, "BadRequest", "startFrom must be a message id (string) or a time in ms (number)"
        )
    return {"inclusive": inclusive, "limit": limit}


async def _read(ctx: RestContext, name: str, body: dict[str, Any]) -> ReadResult:
    """The poll's read, from this peer."""
    args = _read_args(body)
    consistency, min_index = _consistency(body)
    try:
        return await ctx.gateway.topics.read(
            name, consistency=consistency, min_index=min_index, url=ctx.gateway.own_url,
            timeout=ctx.gateway.timeout, **args,
        )
    except Exception as exc:
        raise from_cluster(exc) from exc


async def _first_read(
    ctx: RestContext, request: web.Request, body: dict[str, Any], who: Principal | None
) -> tuple[Sequence[LoggedRecord], bool]:
    """A poll's records and whether more follow, waiting up to its ``waitMs`` for some
    (``raftlog.rest.pages.long_poll``)."""
    _ns, _topic, name = ctx.names(request)
    wait_ms = optional_int(body, "waitMs", 0, MAX_UINT) or 0
    deadline = time.monotonic() + min(wait_ms, ctx.settings.max_wait_ms) / 1000
    result = await _read(ctx, name, body)
    if result.records or not wait_ms:
        return result.records, result.more

    start = _read_args(body)
    del start["limit"]  # a wake-up brings no records

    async def wake(wait: int) -> bool:
        return await own_records_arrive(ctx, name, wait, **start)

    async def read() -> bool:
        nonlocal result
        result = await _read(ctx, name, body)
        return bool(result.records)

    await long_poll(ctx, request, who, deadline, wake=wake, read=read)
    return result.records, result.more


def add_message_routes(
    app: web.Application, ctx: RestContext, transactional: TransactionalPublish | None
) -> None:
    """Register publish and poll; ``transactional`` handles a publish naming a transaction."""
    base = "/namespaces/{ns}/topics/{topic}"

    async def publish(request: web.Request) -> web.Response:
        _ns, _topic, name = ctx.names(request)
        who = ctx.auth.require(request, Role.WRITER, publish=name)
        body = await read_json_object(request, ctx.max_body)
        check_fields(body, PUBLISH_FIELDS)
        if body.get("transaction") is not None:
            if body.get("expectLastId") is not None:
                raise RestError(400, "BadRequest", "expectLastId does not apply to a commit")
            if transactional is None:
                raise RestError(501, "NotImplemented", "transactions are not available")
            return await transactional(request, ctx, name, body)
        ids = await plain_publish(
            ctx, name, body, request_id_of(request),
            lambda payloads: ctx.quotas.payloads(request, who, payloads),
        )
        return json_reply({"ids": ids})

    async def poll(request: web.Request) -> web.Response:
        _ns, _topic, name = ctx.names(request)
        who = ctx.auth.require(request, Role.READER, read=name)
        body = await read_json_object(request, ctx.max_body, optional=True)
        check_fields(body, POLL_FIELDS)
        # room for what the read may bring (waits while large answers fill the memory; a
        # 503 comes before a group poll leases anything)
        await ctx.answers.reserve_read(request, ctx.settings.request_timeout_ms / 1000)
        if body.get("group") is not None:  # as a consumer group's member (issue #27)
            return await group_poll(ctx, request, name, body, who)
        encoding = encoding_of(body)
        timeout = ctx.settings.request_timeout_ms / 1000

        async def again() -> tuple[Sequence[LoggedRecord], bool]:
            reread = await _read(ctx, name, body)
            return reread.records, reread.more

        page, more = await answer_within(
            request, ctx.answers, timeout=timeout, first=await _first_read(ctx, request, body, who),
            read_again=again, form=MessageFormat(
                lambda item: {"id": format_id(item.id), "timestamp": item.append_time_ms,
                              **encode_payload(item.record.value, encoding)},
                lambda item: len(item.record.value), encoding),
        )
        return page.response({}, more=more)

    app.router.add_post(base + "/publish", publish)
    app.router.add_post(base + "/poll", poll)
