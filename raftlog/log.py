"""structlog set-up shared by the peer, the tools and the client, and the one console format.

Events are snake_case names (``became_leader``, ``vote_granted``, ``entries_committed``) with
keyword fields, never prose or f-strings, so logs can be grepped and parsed. A terminal gets
readable console lines; anything else (files, pipes, CI) gets one JSON object per line.

Three properties operators rely on:

* **Unbuffered, whole lines.** Every event is one ``os.write`` of one complete line: nothing
  waits in a Python buffer (a relay such as ``raftlog-local-cluster`` or journald sees each
  line when it is logged), lines from several processes sharing a pipe never interleave
  (writes up to ``PIPE_BUF`` are atomic), and no lock is taken, so logging from a signal
  handler cannot deadlock on a lock the interrupted code holds.
* **One console format** (:func:`render_console`): a single ``raftlog-peer`` on a terminal and
  ``make run`` (which renders its children's JSON lines with the same function) look alike.
  Leadership changes are highlighted so they stand out in a busy console.
* **Reopenable log files** (:func:`reopen_log_file`): with ``--log-file`` the peer writes to
  a file that SIGHUP reopens in place (``dup2``), the contract logrotate's default
  ``create`` mode expects.
"""

from __future__ import annotations

import logging
import os
import select
import sys
from collections.abc import Mapping
from typing import Any

import structlog

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

# Events that change who leads: highlighted on the console so they stand out.
LEADERSHIP_EVENTS = frozenset({"became_leader", "stepped_down"})

_RESET = "\x1b[0m"
_LEVEL_STYLE = {"warning": "\x1b[33m", "error": "\x1b[31;1m", "critical": "\x1b[31;1m"}
_EVENT_STYLE = {"became_leader": "\x1b[1;30;42m", "stepped_down": "\x1b[1;30;43m"}
_DIM = "\x1b[2m"


class LogSink:
    """Where log lines go: a file descriptor written with one ``os.write`` per line.

    ``path`` (optional) is the log file behind the descriptor; :meth:`reopen` opens it again
    and moves the new file onto the same descriptor number, so nothing that holds the number
    needs to know (safe inside a signal handler: ``open``/``dup2``/``close`` only).
    """

    def __init__(self, fd: int, path: str | None = None) -> None:
        self.fd = fd
        self.path = path

    @classmethod
    def open_file(cls, path: str) -> LogSink:
        """A sink appending to ``path`` (created with mode 0640 if missing)."""
        return cls(_open_append(path), path)

    def write_line(self, line: str) -> None:
        """Write ``line`` and a newline with one ``os.write`` (retried only for the rest of a
        partial write); errors are swallowed: a peer never stops because logging failed."""
        data = (line + "\n").encode("utf-8", "replace")
        view = memoryview(data)
        while view:
            try:
                written = os.write(self.fd, view)
            except BlockingIOError:  # a non-blocking descriptor we share: wait, then retry
                select.select([], [self.fd], [], 1.0)
                continue
            except OSError:
                return  # the reader is gone (closed pipe, full disk): never crash on logging
            view = view[written:]

    def reopen(self) -> bool:
        """Reopen the log file in place (after logrotate moved it); False without a file."""
        if self.path is None:
            return False
        fd = _open_append(self.path)
        try:
            os.dup2(fd, self.fd)
        finally:
            os.close(fd)
        return True


def _open_append(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)


class _SinkLogger:
    """The structlog logger object: hands each rendered line to the process's sink."""

    def __init__(self, sink: LogSink) -> None:
        self._sink = sink

    def msg(self, message: str) -> None:
        self._sink.write_line(message)

    log = debug = info = warn = warning = msg
    fatal = failure = err = error = critical = exception = msg


class _Current:
    """The sink of the last :func:`configure_logging` (a holder, not a rebound global)."""

    sink = LogSink(2)


def reopen_log_file() -> bool:
    """Reopen the log file given to :func:`configure_logging` (SIGHUP); False if logging
    goes to stderr, which the supervisor (journald, docker, a terminal) owns."""
    return _Current.sink.reopen()


def log_file_path() -> str | None:
    """The log file in use, or None when logging to stderr."""
    return _Current.sink.path


def _stamp(value: object) -> str:
    """``HH:MM:SS.mmm`` of an ISO-8601 timestamp (``2026-11-23T18:39:44.123456Z``)."""
    text = str(value)
    return text[11:23] if len(text) >= 23 and text[10] == "T" else text


def render_console(record: Mapping[str, Any], *, colors: bool = False) -> str:
    """One readable line for one event: ``time LEVEL [peer id] event key=value ...``.

    Used for the peer's own console output and by ``raftlog-local-cluster`` for its children's
    JSON lines, so both look the same. Leadership events get a ``>>>`` marker (and a coloured
    background with ``colors``); warnings and errors show their level in colour.
    """
    fields = dict(record)
    stamp = _stamp(fields.pop("timestamp", ""))
    event = str(fields.pop("event", "?"))
    level = str(fields.pop("level", "info"))
    peer_id = fields.pop("peer_id", None)
    exception = fields.pop("exception", None)
    who = "" if peer_id is None else f" [peer {peer_id}]"
    pairs = " ".join(f"{key}={value}" for key, value in fields.items())
    marker = ">>> " if event in LEADERSHIP_EVENTS else ""
    level_text = f"{level.upper():<5}"
    if colors:
        style = _LEVEL_STYLE.get(level)
        if style:
            level_text = f"{style}{level_text}{_RESET}"
        event_style = _EVENT_STYLE.get(event)
        shown_event = f"{event_style}{event}{_RESET}" if event_style else f"\x1b[1m{event}{_RESET}"
        stamp = f"{_DIM}{stamp}{_RESET}"
    else:
        shown_event = event
    line = f"{marker}{stamp} {level_text}{who} {shown_event} {pairs}".rstrip()
    if exception:
        line += "\n" + str(exception).rstrip()
    return line


class _ConsoleRenderer:
    """structlog processor wrapping :func:`render_console`."""

    def __init__(self, colors: bool) -> None:
        self._colors = colors

    def __call__(self, _logger: object, _name: str, event_dict: Any) -> str:
        return render_console(event_dict, colors=self._colors)


def configure_logging(
    level: str | None = None, *, json: bool | None = None, log_file: str | None = None
) -> None:
    """Configure structlog once per process.

    ``level`` defaults to ``$RAFTLOG_LOG_LEVEL`` or ``info``; ``json`` defaults to "the
    output is not a terminal" (override with ``$RAFTLOG_LOG_FORMAT=json|console``).
    ``log_file`` appends to that file instead of stderr (reopened by :func:`reopen_log_file`).
    """
    name = (level or os.environ.get("RAFTLOG_LOG_LEVEL") or "info").lower()
    if name not in _LEVELS:
        raise ValueError(f"unknown log level {name!r}; use one of {', '.join(_LEVELS)}")
    if log_file is not None:
        try:
            sink = LogSink.open_file(log_file)
        except OSError as exc:
            raise ValueError(f"cannot open log file {log_file}: {exc.strerror}") from None
    else:
        sink = LogSink(sys.stderr.fileno())
    is_terminal = os.isatty(sink.fd)
    if json is None:
        fmt = os.environ.get("RAFTLOG_LOG_FORMAT")
        json = fmt == "json" if fmt in ("json", "console") else not is_terminal
    renderer: Any = (
        structlog.processors.JSONRenderer() if json else _ConsoleRenderer(colors=is_terminal)
    )
    _Current.sink = sink
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[name]),
        logger_factory=lambda *_args: _SinkLogger(sink),
        cache_logger_on_first_use=True,
    )


def get_logger(**context: Any) -> Any:
    """A bound logger carrying ``context`` (e.g. ``peer_id``) on every event."""
    return structlog.get_logger().bind(**context)
