"""Consumer groups over REST (issue #27), in the shape of CDAP's messaging API.

``POST …/{topic}/poll`` with ``"group"`` (and optionally ``"member"``) consumes as a
member of that group instead of reading from ``startFrom``:

* a queue group leases up to ``limit`` of the topic's records to the member (default
  ``rest-<principal>``) and answers them -- with every record of the topic already leased
  to that member -- each with ``deliveries``; ack or nack them before the group's
  ``ack_wait_ms`` or they are redelivered. One answer holds at most 4 MiB of records (a
  larger one alone); ``X-Raftlog-More: true`` says more are leased to the member, and
  nothing new is leased while what it holds fills an answer (ack, then poll again);
* a stream group answers the records from the group's committed position on.

``POST …/{topic}/ack`` ``{"group", "member"?, "ids": [...], "nack"?: false, "reason"?}``
acks (or nacks) queue leases, or commits a stream group's position past the highest id.
Both need read on the topic and, on a secure cluster, the token's ``consume`` right on the
group (docs/consumers.md, docs/security.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from aiohttp import web

from raftlog.rest.bodies import (
    check_fields,
    encode_payload,
    encoding_of,
    format_id,
    json_reply,
    optional_int,
    parse_id,
    read_json_object,
)
from raftlog.rest.context import RestContext
from raftlog.rest.pages import MessageFormat, answer_within
from raftlog.security.policy import Principal, Role
from raftlog.topics.groups.model import GroupInfo, check_group_name, check_member
from raftlog.topics.groups.wire import LeasedPage
from raftlog.topics.records import LoggedRecord
from raftlog.topics.wire import DEFAULT_READ_LIMIT, MAX_READ_LIMIT
from raftlog.web.errors import RestError, from_cluster

ACK_FIELDS: Final = frozenset({"group", "member", "ids", "nack", "reason"})
MAX_GROUP_POLL: Final = 1000


def _names(body: dict[str, Any], who: Principal | None) -> tuple[str, str]:
    try:
        group = check_group_name(body.get("group"))
        member = body.get("member") or f"rest-{who.name if who is not None else 'client'}"
        return group, check_member(member)
    except Exception as exc:
        raise from_cluster(exc) from exc


def _check_consume(who: Principal | None, group: str) -> None:
    if who is not None and not who.consume.allows(group):
        raise RestError(403, "Forbidden", f"{who.name} may not consume from group {group!r}")


async def group_poll(
    ctx: RestContext, request: web.Request, name: str, body: dict[str, Any],
    who: Principal | None,
) -> web.Response:
    """``poll`` with a ``group`` (module docstring), its answer memory reserved."""
    group, member = _names(body, who)
    _check_consume(who, group)
    encoding = encoding_of(body)
    limit = optional_int(body, "limit", 1, MAX_READ_LIMIT) or DEFAULT_READ_LIMIT
    topics = ctx.gateway.topics
    try:
        info = await topics.describe_group(group, timeout=ctx.gateway.timeout)
    except Exception as exc:
        raise from_cluster(exc) from exc
    read = _group_read(ctx, info, member=member, topic=name, limit=limit)
    page, more = await answer_within(
        request, ctx.answers, timeout=ctx.settings.request_timeout_ms / 1000,
        first=await read(True), read_again=lambda: read(False), form=MessageFormat(
            lambda pair: {"id": format_id(pair[0].id), "timestamp": pair[0].append_time_ms,
                          "deliveries": pair[1],
                          **encode_payload(pair[0].record.value, encoding)},
            lambda pair: len(pair[0].record.value), encoding),
    )
    return page.response({"X-Raftlog-Member": member}, more=more)


GroupRead = Callable[[bool], Awaitable[tuple[Sequence[tuple[LoggedRecord, int]], bool]]]
"""A group poll's read -- ``True`` for its first, which may lease -- with each record's
delivery count, and whether more follow."""


def _group_read(ctx: RestContext, info: GroupInfo, *, member: str, topic: str,
                limit: int) -> GroupRead:
    """The read of a poll of ``topic`` as ``member`` of group ``info``."""
    topics = ctx.gateway.topics

    async def read(first: bool) -> tuple[Sequence[tuple[LoggedRecord, int]], bool]:
        try:
            return await records(first)
        except Exception as exc:
            raise from_cluster(exc) from exc

    async def records(first: bool) -> tuple[Sequence[tuple[LoggedRecord, int]], bool]:
        if info.mode == "queue":
            held = await _queue_page(ctx, info.name, member, topic,
                                     min(limit, MAX_GROUP_POLL), lease=first)
            return [(x.item, x.deliveries) for x in held.records if x.item is not None], \
                held.more
        start = info.positions.get(topic)
        result = await topics.read(
            topic, from_index=None if start is None else start.next_record.index,
            from_position=None if start is None else start.next_record.position,
            limit=limit, timeout=ctx.gateway.timeout,
        )
        return [(item, 1) for item in result.records], result.more

    return read


async def _queue_page(
    ctx: RestContext, group: str, member: str, topic: str, limit: int, *, lease: bool
) -> LeasedPage:
    """What a queue group's poll answers: the member's leases of ``topic``, one answer's
    worth (4 MiB of records; ``more`` when further leases wait). New records are leased
    (with ``lease``) only while what the member holds fits one answer: a lease it cannot be
    shown would run out unseen and count as a delivery."""
    topics, timeout = ctx.gateway.topics, ctx.gateway.timeout
    held = await topics.leased(group, member, topic=topic, timeout=timeout)
    if held.more or not lease:
        return held
    index = await topics.lease_more(group, member, limit, only_topics=[topic], timeout=timeout)
    if not index:
        return held
    return await topics.leased(group, member, topic=topic, min_applied=index, timeout=timeout)


def add_group_routes(app: web.Application, ctx: RestContext) -> None:
    """Register ``…/{topic}/ack`` (the group ``poll`` is the message routes' ``poll``)."""

    async def ack(request: web.Request) -> web.Response:
        _ns, _topic, name = ctx.names(request)
        who = ctx.auth.require(request, Role.WRITER, read=name)
        body = await read_json_object(request, ctx.max_body)
        check_fields(body, ACK_FIELDS)
        group, member = _names(body, who)
        _check_consume(who, group)
        raw = body.get("ids")
        if not isinstance(raw, list) or not raw or not all(isinstance(i, str) for i in raw):
            raise RestError(400, "BadRequest", "ids must be a non-empty list of message ids")
        ids = [parse_id(text, "ids") for text in raw]
        nack = body.get("nack", False)
        reason = body.get("reason", "")
        if not isinstance(nack, bool) or not isinstance(reason, str):
            raise RestError(400, "BadRequest", "nack is a boolean, reason a string")
        topics = ctx.gateway.topics
        try:
            info = await topics.describe_group(group, timeout=ctx.gateway.timeout)
            records = [(name, rid) for rid in ids]
            if info.mode == "stream":
                last = max(ids)
                index = await topics.commit_group_position(
                    group, name, type(last)(last.index, last.position + 1),
                    metadata="rest", member=member, timeout=ctx.gateway.timeout,
                )
            elif nack:
                index = await topics.nack(group, member, records, reason=reason,
                                          timeout=ctx.gateway.timeout)
            else:
                index = await topics.ack(group, member, records, timeout=ctx.gateway.timeout)
        except Exception as exc:
            raise from_cluster(exc) from exc
        await ctx.gateway.caught_up(index)
        return json_reply({"group": group, "member": member, "index": index})

    app.router.add_post("/namespaces/{ns}/topics/{topic}/ack", ack)
