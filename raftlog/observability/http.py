"""The per-peer HTTP listener: ``/metrics``, ``/healthz``, ``/readyz`` (and the status page).

Why aiohttp in its own thread: the consensus loop is a blocking ``zmq.Poller`` loop that
must never wait on a slow HTTP client; aiohttp gives a real, maintained HTTP/1.1 server
(keep-alive, streaming responses for a live page, a REST API later) on an asyncio loop that
runs in a daemon thread of its own. It only reads the :class:`ViewBox` and the metrics
registry, never the node. ``prometheus_client`` renders the exposition format.

Facing the network (issue #25): connections are admitted by a
:class:`~raftlog.observability.guard.ConnectionGuard` (caps, header/idle time-outs, quiet
floods); an ``https://`` listener serves TLS with the ``[http]`` certificate; ``/metrics``,
the status page and ``/api/cluster`` need a token where ``[http] monitoring_token`` (by
default: a secure cluster) says so; ``/healthz`` probes the disk at most once a second
and answers one source address at most ``HEALTHZ_RATE`` times a second (429 beyond).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import ssl
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Final

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from raftlog.client.runner import LoopStartError, LoopThread
from raftlog.metrics import Registry
from raftlog.observability.cluster_poll import ClusterPoller
from raftlog.observability.collector import PeerCollector
from raftlog.observability.guard import ConnectionGuard
from raftlog.observability.guard_metrics import GuardCollector
from raftlog.observability.guarded_site import GuardedSite
from raftlog.observability.health import (
    DEFAULT_READY_MAX_LAG,
    Verdict,
    loop_verdict,
    ready_verdict,
    storage_verdict,
)
from raftlog.observability.history import HistorySampler
from raftlog.observability.http_settings import HttpSettings, ListenerError
from raftlog.observability.static_files import add_static_routes
from raftlog.observability.view import ViewBox
from raftlog.security.policy import Role
from raftlog.security.quotas import Quota, QuotaBook
from raftlog.security.settings import CurveClient, PeerSecurity
from raftlog.web.app_keys import BODY_TIMEOUT
from raftlog.web.auth import Authenticator
from raftlog.web.errors import RestError

START_TIMEOUT: Final = 10.0
"""Seconds to wait for the listener to bind before the peer gives up starting."""
READ_BUFSIZE: Final = 16 * 1024
"""aiohttp's request-body buffer per connection (it stops reading the socket at twice this
until the handler reads): a body waiting for the REST body memory costs the peer ~0.25 MiB
per connection with it, ~0.75 MiB with aiohttp's 64 KiB (144 waiting bodies: +36 against
+107 MiB)."""
STORAGE_PROBE_TTL: Final = 1.0
"""Seconds a ``/healthz`` disk probe's verdict is reused: a hammer costs one synced write a
second, whatever its rate."""
HEALTHZ_RATE: Final = Quota(records_per_s=20.0, records_burst=40.0)
"""``/healthz`` answers per second (and burst) to one source address: an orchestrator or load
balancer probes every few seconds; a hammer past this gets 429 with ``Retry-After`` before
any work is done, so it cannot crowd out the probes of others (issue #25)."""
PROTECTED: Final = frozenset({"/metrics", "/", "/api/cluster", "/api/history"})
"""What ``[http] monitoring_token`` guards: they name topics, members and elections."""


def _verdict_response(verdict: Verdict) -> web.Response:
    return web.Response(
        status=verdict.status,
        text=json.dumps({"ok": verdict.ok, "reason": verdict.reason}) + "\n",
        content_type="application/json",
    )


class StorageProbe:
    """``storage_verdict`` of a data directory, run at most once per ``ttl`` seconds (the
    callers within share the probe in flight and its verdict)."""

    def __init__(self, data_dir: Path, ttl: float = STORAGE_PROBE_TTL) -> None:
        self._data_dir = data_dir
        self._ttl = ttl
        self._verdict: Verdict | None = None
        self._at = 0.0
        self._running: asyncio.Future[Verdict] | None = None
        self.probes = 0
        """Disk probes made so far (what a test of the cache counts)."""

    async def verdict(self) -> Verdict:
        """The cached verdict if fresh, else the probe in flight, else a new probe."""
        if self._verdict is not None and time.monotonic() - self._at < self._ttl:
            return self._verdict
        if self._running is None:
            self.probes += 1
            # an fsync may take a while on a loaded disk: off the event loop
            self._running = asyncio.ensure_future(
                asyncio.to_thread(storage_verdict, self._data_dir)
            )
        running = self._running
        try:
            verdict = await asyncio.shield(running)
        finally:
            if self._running is running and running.done():
                self._running = None
        self._verdict, self._at = verdict, time.monotonic()
        return verdict


def monitoring_guard(auth: Authenticator) -> Middleware:
    """A middleware that asks a token (any client of the allowlist, bearer or HTTP Basic
    with the token as password, so a browser can open the status page) for ``PROTECTED``
    paths."""

    @web.middleware
    async def guard(
        request: web.Request,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        if request.path in PROTECTED:
            try:
                auth.require(request, Role.READER)
            except RestError as exc:
                return web.json_response(
                    exc.body(),
                    status=exc.status,
                    headers={"WWW-Authenticate": 'Basic realm="raftlog", charset="UTF-8"'}
                    if exc.status == 401 else None,
                )
        return await handler(request)

    return guard


def build_app(
    views: ViewBox,
    registry: Registry,
    data_dir: Path,
    *,
    ready_max_lag: int,
    poller: ClusterPoller | None = None,
    mount: Callable[[web.Application], None] | None = None,
    monitoring_auth: Authenticator | None = None,
    topic_metrics: bool = True,
    healthz_rate: Quota | None = HEALTHZ_RATE,
) -> web.Application:
    """The aiohttp application (separate from the thread so tests can drive it directly).
    With a ``poller`` it also serves the status page (``/``), its data
    (``/api/cluster``), its history (``/api/history``) and static files (``/static/``),
    and runs the poller and the history sampler while the app runs. ``mount`` registers more
    routes (the REST API, ``raftlog.rest.app.mount``). ``monitoring_auth``: the tokens
    ``/metrics``, ``/`` and ``/api/cluster`` require (None: open). ``healthz_rate``: the
    ``/healthz`` answers one source address gets per second (None: unlimited)."""
    prom = CollectorRegistry(auto_describe=False)
    prom.register(PeerCollector(registry, views, topics=topic_metrics))
    probe = StorageProbe(data_dir)

    async def metrics(_request: web.Request) -> web.Response:
        body = generate_latest(prom)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    probes_by_address = QuotaBook(per_address=True)

    async def healthz(request: web.Request) -> web.Response:
        if healthz_rate is not None:
            who = request.remote or "-"
            wait = probes_by_address.publish_wait(who, healthz_rate, 1, 0, time.monotonic())
            if wait:
                return web.json_response(
                    {"ok": False, "reason": "too many /healthz requests from this address"},
                    status=429, headers={"Retry-After": str(math.ceil(wait))})
        verdict = loop_verdict(views.latest())
        if verdict.ok:
            verdict = await probe.verdict()
        return _verdict_response(verdict)

    async def readyz(request: web.Request) -> web.Response:
        raw = request.query.get("max_lag")
        if raw is not None and not raw.isdigit():
            return _verdict_response(Verdict(False, f"max_lag must be a number, got {raw!r}"))
        max_lag = ready_max_lag if raw is None else int(raw)
        return _verdict_response(ready_verdict(views.latest(), max_lag))

    middlewares = [] if monitoring_auth is None else [monitoring_guard(monitoring_auth)]
    app = web.Application(middlewares=middlewares)
    app[STORAGE_PROBE] = probe
    app[PROMETHEUS] = prom
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    if poller is not None:
        _add_status_page(app, poller, HistorySampler(views, registry, poller.lags))
    if mount is not None:
        mount(app)
    return app


def _add_status_page(
    app: web.Application, poller: ClusterPoller, history: HistorySampler
) -> None:
    page = (resources.files("raftlog.observability") / "status.html").read_bytes()

    async def index(_request: web.Request) -> web.Response:
        return web.Response(body=page, content_type="text/html", charset="utf-8")

    async def cluster(_request: web.Request) -> web.Response:
        return web.json_response(poller.snapshot(), headers={"Cache-Control": "no-store"})

    async def samples(request: web.Request) -> web.Response:
        try:
            since = float(request.query.get("since", "0"))
        except ValueError:
            return web.json_response({"error": "since must be a number (wall time)"}, status=400)
        return web.json_response(history.as_json(since), headers={"Cache-Control": "no-store"})

    async def start_polling(app: web.Application) -> None:
        loop = asyncio.get_running_loop()
        app[_POLL_TASK] = loop.create_task(poller.run())
        app[_HISTORY_TASK] = loop.create_task(history.run())

    async def stop_polling(app: web.Application) -> None:
        for task in (app[_POLL_TASK], app[_HISTORY_TASK]):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app.router.add_get("/", index)
    app.router.add_get("/api/cluster", cluster)
    app.router.add_get("/api/history", samples)
    add_static_routes(app)
    app.on_startup.append(start_polling)
    app.on_cleanup.append(stop_polling)


_POLL_TASK: Final = web.AppKey("poll_task", asyncio.Task)
_HISTORY_TASK: Final = web.AppKey("history_task", asyncio.Task)
STORAGE_PROBE: Final = web.AppKey("storage_probe", StorageProbe)
PROMETHEUS: Final = web.AppKey("prometheus", CollectorRegistry)
"""The registry ``/metrics`` renders (the listener adds its connection guard's metrics)."""


class HttpListener:
    """Runs :func:`build_app` on ``host:port`` in a daemon thread with its own event loop,
    accepting through a :class:`ConnectionGuard` (``limits``; TLS with ``ssl_context``).

    ``start`` returns once the port is bound (or raises ``ListenerError``), so a
    peer with a taken HTTP port fails at start-up like one with a taken ROUTER port."""

    def __init__(
        self,
        app: web.Application,
        host: str,
        port: int,
        *,
        limits: HttpSettings | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        limits = limits if limits is not None else HttpSettings()
        self._app = app
        self._host = host
        self._port = port
        self.guard = ConnectionGuard(limits, ssl_context)
        """Admits the connections (its ``open`` and ``cap`` say how many)."""
        app.middlewares.append(self.guard.middleware())
        self.expose(GuardCollector(self.guard, "HTTP"))
        app[BODY_TIMEOUT] = limits.body_timeout_ms / 1000
        self._runner = web.AppRunner(
            app,
            access_log=None,
            handle_signals=False,
            keepalive_timeout=limits.idle_timeout_ms / 1000,
            read_bufsize=READ_BUFSIZE,
        )
        self._thread = LoopThread(  # the one loop-thread runner (raftlog.client.runner)
            "raftlog-http",
            owner="the HTTP listener",
            setup=self._bind,
            teardown=self._runner.cleanup,
            exception_handler=self.guard.loop_errors,
        )

    def expose(self, collector: Collector) -> None:
        """Serve another collector in ``/metrics`` too (the Kafka listener's guard and
        group coordinator, which start after this listener)."""
        if PROMETHEUS in self._app:
            self._app[PROMETHEUS].register(collector)

    def start(self) -> None:
        """Bind and serve; raises what binding raised."""
        where = f"{self._host}:{self._port}"
        try:
            self._thread.start(START_TIMEOUT)
        except LoopStartError:
            raise ListenerError(f"HTTP listener on {where} did not start") from None
        except BaseException as exc:  # what binding raised, in the loop's thread
            raise ListenerError(f"cannot serve HTTP on {where}: {exc}") from exc

    async def _bind(self) -> None:
        await self._runner.setup()
        await GuardedSite(self._runner, self.guard, self._host, self._port).start()

    def stop(self) -> None:
        """Close the listener and end the thread (idempotent)."""
        self._thread.stop(START_TIMEOUT)


def tls_context(limits: HttpSettings) -> ssl.SSLContext:
    """The server-side TLS context of an ``https://`` listener (``ListenerError`` when the
    certificate or key cannot be loaded)."""
    if limits.tls_cert is None or limits.tls_key is None:
        raise ListenerError("an https:// http_url needs [http] tls_cert and tls_key")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(limits.tls_cert, limits.tls_key)
    except (OSError, ssl.SSLError) as exc:
        raise ListenerError(
            f"cannot load the HTTP TLS certificate {limits.tls_cert} / key {limits.tls_key}: "
            f"{exc}"
        ) from exc
    return context


def start_listener(
    http_url_host: str,
    port: int,
    views: ViewBox,
    registry: Registry,
    data_dir: Path,
    *,
    ident: str,
    http_urls: dict[str, str],
    curve: CurveClient | None = None,
    ready_max_lag: int = DEFAULT_READY_MAX_LAG,
    mount: Callable[[web.Application], None] | None = None,
    limits: HttpSettings | None = None,
    security: PeerSecurity | None = None,
    tls: bool = False,
) -> HttpListener:
    """Build the app (status page included, plus what ``mount`` registers) and start
    serving it; the caller stops it. ``curve``: the keys the status page's RequestLogInfo
    polls use in a secure cluster; ``security``: whose tokens the monitoring endpoints ask
    for (with ``[http] monitoring_token``, by default in a secure cluster); ``tls``: serve
    HTTPS with the ``limits``' certificate."""
    limits = limits if limits is not None else HttpSettings()
    wants_token = limits.monitoring_token
    if wants_token is None:
        wants_token = security is not None
    if wants_token and security is None:
        raise ListenerError("[http] monitoring_token needs a secure cluster ([security]) "
                            "whose allowlist holds the tokens")
    poller = ClusterPoller(views, ident, http_urls, curve)
    app = build_app(
        views,
        registry,
        data_dir,
        ready_max_lag=ready_max_lag,
        poller=poller,
        mount=mount,
        monitoring_auth=Authenticator(security) if wants_token else None,
        topic_metrics=limits.topic_metrics,
    )
    listener = HttpListener(
        app, http_url_host, port, limits=limits, ssl_context=tls_context(limits) if tls else None
    )
    listener.start()
    return listener
