"""The per-peer HTTP listener: ``/metrics``, ``/healthz``, ``/readyz`` (and the status page).

Why aiohttp in its own thread: the consensus loop is a blocking ``zmq.Poller`` loop that
must never wait on a slow HTTP client; aiohttp gives a real, maintained HTTP/1.1 server
(keep-alive, streaming responses for a live page, a REST API later) on an asyncio loop that
runs in a daemon thread of its own. It only reads the :class:`ViewBox` and the metrics
registry, never the node. ``prometheus_client`` renders the exposition format.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Final

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from raftlog.metrics import Registry
from raftlog.observability.cluster_poll import ClusterPoller
from raftlog.observability.collector import PeerCollector
from raftlog.observability.health import (
    DEFAULT_READY_MAX_LAG,
    Verdict,
    loop_verdict,
    ready_verdict,
    storage_verdict,
)
from raftlog.observability.view import ViewBox
from raftlog.security.settings import CurveClient

START_TIMEOUT: Final = 10.0
"""Seconds to wait for the listener to bind before the peer gives up starting."""


def _verdict_response(verdict: Verdict) -> web.Response:
    return web.Response(
        status=verdict.status,
        text=json.dumps({"ok": verdict.ok, "reason": verdict.reason}) + "\n",
        content_type="application/json",
    )


def build_app(
    views: ViewBox,
    registry: Registry,
    data_dir: Path,
    *,
    ready_max_lag: int,
    poller: ClusterPoller | None = None,
    mount: Callable[[web.Application], None] | None = None,
) -> web.Application:
    """The aiohttp application (separate from the thread so tests can drive it directly).
    With a ``poller`` it also serves the status page (``/``) and its data
    (``/api/cluster``), and runs the poller while the app runs. ``mount`` registers more
    routes (the REST API, ``raftlog.rest.app.mount``)."""
    prom = CollectorRegistry(auto_describe=False)
    prom.register(PeerCollector(registry, views))

    async def metrics(_request: web.Request) -> web.Response:
        body = generate_latest(prom)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_request: web.Request) -> web.Response:
        verdict = loop_verdict(views.latest())
        if verdict.ok:
            # an fsync may take a while on a loaded disk: off the event loop
            verdict = await asyncio.to_thread(storage_verdict, data_dir)
        return _verdict_response(verdict)

    async def readyz(request: web.Request) -> web.Response:
        raw = request.query.get("max_lag")
        if raw is not None and not raw.isdigit():
            return _verdict_response(Verdict(False, f"max_lag must be a number, got {raw!r}"))
        max_lag = ready_max_lag if raw is None else int(raw)
        return _verdict_response(ready_verdict(views.latest(), max_lag))

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    if poller is not None:
        _add_status_page(app, poller)
    if mount is not None:
        mount(app)
    return app


def _add_status_page(app: web.Application, poller: ClusterPoller) -> None:
    page = (resources.files("raftlog.observability") / "status.html").read_bytes()

    async def index(_request: web.Request) -> web.Response:
        return web.Response(body=page, content_type="text/html", charset="utf-8")

    async def cluster(_request: web.Request) -> web.Response:
        return web.json_response(poller.snapshot(), headers={"Cache-Control": "no-store"})

    async def start_polling(app: web.Application) -> None:
        app[_POLL_TASK] = asyncio.get_running_loop().create_task(poller.run())

    async def stop_polling(app: web.Application) -> None:
        task = app[_POLL_TASK]
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app.router.add_get("/", index)
    app.router.add_get("/api/cluster", cluster)
    app.on_startup.append(start_polling)
    app.on_cleanup.append(stop_polling)


_POLL_TASK: Final = web.AppKey("poll_task", asyncio.Task)


class ListenerError(RuntimeError):
    """The HTTP listener could not bind its ``http_url`` (port taken, bad address)."""


class HttpListener:
    """Runs :func:`build_app` on ``host:port`` in a daemon thread with its own event loop.

    ``start`` returns once the port is bound (or raises ``ListenerError``), so a
    peer with a taken HTTP port fails at start-up like one with a taken ROUTER port."""

    def __init__(
        self,
        app: web.Application,
        host: str,
        port: int,
    ) -> None:
        self._app = app
        self._host = host
        self._port = port
        self._loop = asyncio.new_event_loop()
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        self._thread = threading.Thread(target=self._run, name="raftlog-http", daemon=True)
        self._started = threading.Event()
        self._error: BaseException | None = None

    def start(self) -> None:
        """Bind and serve; raises what binding raised."""
        self._thread.start()
        where = f"{self._host}:{self._port}"
        if not self._started.wait(START_TIMEOUT):
            raise ListenerError(f"HTTP listener on {where} did not start")
        if self._error is not None:
            raise ListenerError(f"cannot serve HTTP on {where}: {self._error}") from self._error

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, self._host, self._port, reuse_address=True)
            self._loop.run_until_complete(site.start())
        except BaseException as exc:  # reported to start() in the peer's thread
            self._error = exc
            self._started.set()
            self._loop.run_until_complete(self._runner.cleanup())
            self._loop.close()
            return
        self._started.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._runner.cleanup())
        self._loop.close()

    def stop(self) -> None:
        """Close the listener and end the thread (idempotent)."""
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(START_TIMEOUT)


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
) -> HttpListener:
    """Build the app (status page included, plus what ``mount`` registers) and start
    serving it; the caller stops it. ``curve``: the keys the status page's RequestLogInfo
    polls use in a secure cluster."""
    poller = ClusterPoller(views, ident, http_urls, curve)
    app = build_app(
        views, registry, data_dir, ready_max_lag=ready_max_lag, poller=poller, mount=mount
    )
    listener = HttpListener(app, http_url_host, port)
    listener.start()
    return listener
