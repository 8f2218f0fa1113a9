"""structlog set-up shared by the peer, the tools and the client.

Events are snake_case names (``became_leader``, ``vote_granted``, ``entries_committed``) with
keyword fields, never prose or f-strings, so logs can be grepped and parsed. A terminal gets
readable console lines; anything else (files, pipes, CI) gets one JSON object per line.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import structlog

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def configure_logging(level: str | None = None, *, json: bool | None = None) -> None:
    """Configure structlog once per process.

    ``level`` defaults to ``$RAFTLOG_LOG_LEVEL`` or ``info``; ``json`` defaults to "stderr is
    not a terminal" (override with ``$RAFTLOG_LOG_FORMAT=json|console``).
    """
    name = (level or os.environ.get("RAFTLOG_LOG_LEVEL") or "info").lower()
    if name not in _LEVELS:
        raise ValueError(f"unknown log level {name!r}; use one of {', '.join(_LEVELS)}")
    if json is None:
        fmt = os.environ.get("RAFTLOG_LOG_FORMAT")
        json = fmt == "json" if fmt in ("json", "console") else not sys.stderr.isatty()
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[name]),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


def get_logger(**context: Any) -> Any:
    """A bound logger carrying ``context`` (e.g. ``peer_id``) on every event."""
    return structlog.get_logger().bind(**context)
