"""The status page's static files (``raftlog/observability/static/``), served at ``/static/``.

Why from the package rather than a CDN: peers and the operators' browsers may have no
network. Only the files named in ``STATIC_FILES`` are served (read once at start-up), so a
request can never name a path outside the folder.
"""

from __future__ import annotations

from importlib import resources
from typing import Final

from aiohttp import web

STATIC_FILES: Final = {
    "uPlot.iife.min.js": "application/javascript",
    "uPlot.min.css": "text/css",
    "uPlot.LICENSE": "text/plain",
}
"""Served file name -> content type (``static/README.md`` says where each comes from)."""


def add_static_routes(app: web.Application) -> None:
    """Register ``GET /static/{name}`` for the files of ``STATIC_FILES`` (404 otherwise);
    browsers may cache them for a day (they change only with a raftlog upgrade)."""
    folder = resources.files("raftlog.observability") / "static"
    bodies = {name: (folder / name).read_bytes() for name in STATIC_FILES}

    async def static(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in bodies:
            raise web.HTTPNotFound(text=f"no static file {name!r}\n")
        return web.Response(
            body=bodies[name],
            content_type=STATIC_FILES[name],
            charset="utf-8",
            headers={"Cache-Control": "max-age=86400"},
        )

    app.router.add_get("/static/{name}", static)
