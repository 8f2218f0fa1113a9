"""The client's structlog logger, quiet unless the application asked for logs.

Why not plain ``structlog.get_logger()``: an unconfigured structlog prints every event, debug
included, to stdout -- a library must not write into its caller's output. So the client's
events (snake_case names with keyword fields, like the rest of raftlog) follow the
application's structlog configuration when there is one (the peer, the CLIs call
:func:`raftlog.log.configure_logging`), and otherwise go to the stdlib logger
``raftlog.client``, which is silent at Python's default WARNING level and visible to
``logging`` handlers and pytest's ``caplog``.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import structlog

_STDLIB: Final[Any] = structlog.wrap_logger(
    logging.getLogger("raftlog.client"),
    processors=[structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True)],
    wrapper_class=structlog.stdlib.BoundLogger,
)


def client_log() -> Any:
    """The logger for one client event (decided per call: configuration may come later)."""
    if structlog.is_configured():
        return structlog.get_logger("raftlog.client")
    return _STDLIB
