"""Topic resources: create, update properties, describe, list, delete (CDAP TMS shapes).

| request (under ``/v1/namespaces/{ns}/topics``) | success | failures |
|---|---|---|
| ``PUT /{topic}`` (body: properties, optional) | 200 | 409 exists, 400 bad property |
| ``PUT /{topic}/properties`` (body: properties) | 200 | 404, 400 |
| ``GET /{topic}`` | 200 ``{name, namespace, properties, …}`` | 404 |
| ``GET`` (the list) | 200 ``["name", …]`` | 404 namespace |
| ``DELETE /{topic}`` | 200 | 404 |

Properties are raftlog's (``raftlog.topics.records.PROPERTY_KINDS``: ``retention_ms``,
``max_bytes``, ``max_record_bytes``...) plus CDAP's ``ttl`` (seconds, another way to write
``retention_ms``); limits are integers or decimal strings (CDAP sends a string map), texts
strings; ``null`` removes a property on update.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from aiohttp import web

from raftlog.errors import TopicError
from raftlog.rest.bodies import format_id, json_reply, read_json_object
from raftlog.rest.context import RestContext
from raftlog.security.policy import Role
from raftlog.topics.records import (
    PROPERTY_KINDS,
    PROPERTY_NAMES,
    PropertyValue,
    check_property,
)
from raftlog.topics.wire import TopicInfo
from raftlog.web.errors import RestError, from_cluster

CDAP_TTL: Final = "ttl"


def parse_properties(body: Mapping[str, Any], *, update: bool) -> dict[str, PropertyValue]:
    """raftlog topic properties from a REST body (400 ``InvalidProperty`` on anything
    wrong); each is checked by its kind (``PROPERTY_KINDS``), so a new property needs no
    change here."""
    out: dict[str, PropertyValue] = {}
    for key, raw in body.items():
        name = key
        if name not in (*PROPERTY_NAMES, CDAP_TTL):
            raise RestError(
                400,
                "InvalidProperty",
                f"unknown topic property {name!r} (known: {', '.join(PROPERTY_NAMES)}, ttl)",
            )
        value: PropertyValue
        if raw is None:
            if not update:
                continue
            value = None
        elif PROPERTY_KINDS.get(name) == "text":
            value = raw
        elif (type(raw) is int or (isinstance(raw, str) and raw.isdigit())) and int(raw) > 0:
            value = int(raw)
        else:
            raise RestError(400, "InvalidProperty", f"{key} must be a positive integer")
        if key == CDAP_TTL:
            if "retention_ms" in body:
                raise RestError(400, "InvalidProperty", "give ttl or retention_ms, not both")
            name = "retention_ms"
            value = None if not isinstance(value, int) else value * 1000
        try:
            out[name] = check_property(name, value)
        except TopicError as exc:
            raise RestError(400, "InvalidProperty", f"{key}: {exc}") from None
    return out


def describe_body(namespace: str, topic: str, info: TopicInfo) -> dict[str, Any]:
    """The JSON of ``GET …/{topic}``."""
    props: dict[str, Any] = dict(info.properties.as_dict())
    retention = info.properties.retention_ms
    props[CDAP_TTL] = None if retention is None else retention // 1000
    return {
        "name": topic,
        "namespace": namespace,
        "properties": props,
        "createdIndex": info.created_index,
        "firstMessage": None if info.first is None else format_id(info.first),
        "lastMessage": None if info.last is None else format_id(info.last),
        "lastAppendTime": info.last_append_time_ms,
        "publishedBytes": info.published_bytes,
        "appliedIndex": info.applied,
    }


def add_topic_routes(app: web.Application, ctx: RestContext) -> None:
    """Register the topic resources on the REST sub-application."""
    topic_path = "/namespaces/{ns}/topics/{topic}"

    async def create(request: web.Request) -> web.Response:
        ns, topic, name = ctx.names(request)
        ctx.auth.require(request, Role.ADMIN)
        props = parse_properties(
            await read_json_object(request, ctx.max_body, optional=True), update=False
        )
        try:
            index = await ctx.gateway.topics.create_topic(
                name,
                properties=props,
                timeout=ctx.gateway.timeout,
            )
        except Exception as exc:
            raise from_cluster(exc) from exc
        if index is not None:
            await ctx.gateway.caught_up(index)
        return json_reply({"name": topic, "namespace": ns, "createdIndex": index})

    async def update(request: web.Request) -> web.Response:
        ns, topic, name = ctx.names(request)
        ctx.auth.require(request, Role.ADMIN)
        body = await read_json_object(request, ctx.max_body)
        changes = parse_properties(body, update=True)
        try:
            index = await ctx.gateway.topics.update_topic(
                name, changes, timeout=ctx.gateway.timeout
            )
        except Exception as exc:
            raise from_cluster(exc) from exc
        await ctx.gateway.caught_up(index)
        return json_reply({"name": topic, "namespace": ns, "index": index})

    async def describe(request: web.Request) -> web.Response:
        ns, topic, name = ctx.names(request)
        ctx.auth.require(request, Role.READER, read=name)
        try:
            info = await ctx.gateway.topics.describe(
                name, url=ctx.gateway.own_url, timeout=ctx.gateway.timeout
            )
        except Exception as exc:
            raise from_cluster(exc) from exc
        return json_reply(describe_body(ns, topic, info))

    async def delete(request: web.Request) -> web.Response:
        ns, topic, name = ctx.names(request)
        ctx.auth.require(request, Role.ADMIN)
        try:
            index = await ctx.gateway.topics.delete_topic(name, timeout=ctx.gateway.timeout)
        except Exception as exc:
            raise from_cluster(exc) from exc
        await ctx.gateway.caught_up(index)
        return json_reply({"name": topic, "namespace": ns, "index": index})

    async def list_topics(request: web.Request) -> web.Response:
        ns = request.match_info["ns"]
        ctx.namespaces.check(ns)
        who = ctx.auth.require(request, Role.READER)
        try:
            names = await ctx.gateway.topics.list_topics(
                url=ctx.gateway.own_url, timeout=ctx.gateway.timeout
            )
        except Exception as exc:
            raise from_cluster(exc) from exc
        visible = tuple(n for n in names if ctx.auth.may_read(who, n))
        return json_reply(ctx.namespaces.topics_of(ns, visible))

    async def list_namespaces(request: web.Request) -> web.Response:
        ctx.auth.require(request, Role.READER)
        return json_reply(sorted(ctx.settings.namespaces))

    app.router.add_get("/namespaces", list_namespaces)
    app.router.add_get("/namespaces/{ns}/topics", list_topics)
    app.router.add_put(topic_path, create)
    app.router.add_get(topic_path, describe)
    app.router.add_delete(topic_path, delete)
    app.router.add_put(topic_path + "/properties", update)
