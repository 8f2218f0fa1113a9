"""aiohttp application keys the HTTP listener sets on its root app for every route below it.

Why here: the listener (``raftlog.observability.http``) sets them from ``[http]`` and the
REST API (``raftlog.rest.bodies``) reads them; neither package owns the other.
"""

from __future__ import annotations

from typing import Final

from aiohttp import web

DEFAULT_BODY_TIMEOUT: Final = 30.0
"""Seconds a request body may take when the listener set no ``BODY_TIMEOUT``."""
BODY_TIMEOUT: Final = web.AppKey("body_timeout", float)
"""Seconds a request body may take to arrive (set on the root app from ``[http]
body_timeout_ms``; ``DEFAULT_BODY_TIMEOUT`` when absent)."""
