"""The REST sub-application mounted at ``/v1`` on a peer's HTTP listener.

Why a sub-application: its error middleware (every failure as a JSON body with a stable
code), its start-up (the cluster client on the listener's loop) and its routes stay apart
from the monitoring app it is mounted on; the listener only calls :func:`mount`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Final

import structlog
from aiohttp import web
from aiohttp.typedefs import Middleware

from raftlog.config import PeerSettings
from raftlog.metrics import Counter
from raftlog.observability.http import PROMETHEUS
from raftlog.rest.answer_memory import AnswerCollector, AnswerMemory
from raftlog.rest.bodies import json_reply
from raftlog.rest.body_memory import BODY_MEMORY, BodyCollector, BodyMemory
from raftlog.rest.context import RestContext
from raftlog.rest.gateway import ClusterGateway
from raftlog.rest.group_routes import add_group_routes
from raftlog.rest.kv_routes import add_kv_routes
from raftlog.rest.message_routes import add_message_routes
from raftlog.rest.names import Namespaces
from raftlog.rest.openapi import openapi_document
from raftlog.rest.quota_checks import RestQuotas
from raftlog.rest.topic_routes import add_topic_routes
from raftlog.rest.tx_routes import add_transaction_routes
from raftlog.server.apply_signal import ApplySignal
from raftlog.web.auth import Authenticator
from raftlog.web.errors import RestError, from_cluster

PREFIX: Final = "/v1"
log = structlog.get_logger("raftlog.rest")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error_response(error: RestError) -> web.Response:
    headers = dict(error.headers)
    if error.status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="raftlog"'
    return json_reply(error.body(), status=error.status, headers=headers or None)


@web.middleware
async def errors_as_json(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure as ``{"error", "message"}`` JSON; nothing a client sends makes a 500
    without a log line saying why."""
    try:
        return await handler(request)
    except RestError as exc:
        return _error_response(exc)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _error_response(RestError(exc.status, exc.reason.replace(" ", ""), exc.reason))
    except Exception as exc:  # a cluster error not mapped where it arose
        try:
            return _error_response(from_cluster(exc))
        except Exception:
            log.exception("rest_internal_error", path=request.path)
            return _error_response(RestError(500, "InternalError", f"{type(exc).__name__}"))


def ends_on_shutdown(closing: asyncio.Event) -> Middleware:
    """A middleware that answers 503 ``ShuttingDown`` to a request still running when the
    listener stops (a forwarded write waiting for a leader, a long poll mid-read): the peer's
    exit must not wait for the clients' time-outs. The client may retry on another peer."""

    def gone() -> RestError:
        return RestError(503, "ShuttingDown", "this peer is stopping; retry on another peer")

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if closing.is_set():
            raise gone()
        work = asyncio.ensure_future(handler(request))
        stop = asyncio.ensure_future(closing.wait())
        try:
            await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if not work.done():
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await work
            raise gone()
        try:
            return work.result()
        finally:  # the task keeps the handler's error, whose traceback holds this frame: a
            del work  # cycle that kept every failed request's body until the cyclic collector

    return guard


_CONTEXT: Final = web.AppKey("rest_context", RestContext)


def build_rest_app(ctx: RestContext) -> web.Application:
    """The ``/v1`` application over ``ctx`` (tests build one with a fake gateway)."""
    app = web.Application(  # the answer memory inside all but the body memory: it writes
        middlewares=[errors_as_json, ends_on_shutdown(ctx.gateway.closing),  # large answers
                     ctx.answers.middleware(), ctx.bodies.middleware()]  # itself, after the
    )  # handler gave back its body's bytes
    app[_CONTEXT] = ctx
    app[BODY_MEMORY] = ctx.bodies
    spec = json.dumps(openapi_document()).encode()

    async def openapi(_request: web.Request) -> web.Response:
        return web.Response(body=spec, content_type="application/json")

    async def start(_app: web.Application) -> None:
        await ctx.gateway.start()

    async def shutting_down(_app: web.Application) -> None:
        ctx.gateway.shutting_down()  # before aiohttp waits for open requests to finish

    async def stop(_app: web.Application) -> None:
        await ctx.gateway.close()

    app.router.add_get("/openapi.json", openapi)
    add_topic_routes(app, ctx)
    add_kv_routes(app, ctx)  # issue #29
    add_group_routes(app, ctx)  # the ack endpoint (issue #27)
    add_message_routes(app, ctx, add_transaction_routes(app, ctx))
    app.on_startup.append(start)
    app.on_shutdown.append(shutting_down)
    app.on_cleanup.append(stop)
    return app


def context_for(
    settings: PeerSettings, applied: ApplySignal | None = None,
    quota_refusals: Counter | None = None,
) -> RestContext:
    """The REST context of a peer: its cluster's peers, its own URL, keys and limits, the
    signal its consensus thread notifies after each applied batch, and the counter its
    quota refusals go to (``raftlog_quota_refusals``)."""
    security = settings.security
    gateway = ClusterGateway(
        [peer.url for peer in settings.peers] or [settings.url],
        settings.url,
        settings.ident,
        curve=None if security is None else security.client,
        max_entry_size=settings.options.max_log_entry_data_size,
        timeout=settings.rest.request_timeout_ms / 1000,
        applied=applied,
    )
    return RestContext(
        gateway=gateway,
        auth=Authenticator(security),
        namespaces=Namespaces(settings.rest),
        settings=settings.rest,
        quotas=RestQuotas(settings.quotas, quota_refusals, secure=security is not None),
        answers=AnswerMemory(settings.rest.answer_memory_bytes),
        bodies=BodyMemory(settings.rest.body_memory_bytes),
    )


def mount(
    root: web.Application, settings: PeerSettings, applied: ApplySignal | None = None,
    quota_refusals: Counter | None = None,
) -> None:
    """Serve the REST API of the peer described by ``settings`` under ``/v1`` of ``root``
    (the route-registration hook the HTTP listener calls)."""
    ctx = context_for(settings, applied, quota_refusals)
    root.add_subapp(PREFIX, build_rest_app(ctx))
    if PROMETHEUS in root:  # the answer and body memories in the listener's /metrics
        root[PROMETHEUS].register(AnswerCollector(ctx.answers))
        root[PROMETHEUS].register(BodyCollector(ctx.bodies))
