"""SIGHUP for a running peer: reopen the log file, re-read the cluster file, never stop.

Why: operators (and logrotate, systemd's ``ExecReload``, ``docker kill -s HUP``) send SIGHUP
expecting a daemon to reopen its logs and pick up configuration; Python's default action for
SIGHUP is to terminate, which used to take a peer down with exit status 129.

What can be reloaded without a restart is the log file (reopened in place; see
``raftlog.log``) and, on a CURVE peer, the client allowlist (``also``: the node re-reads it
between two passes of its loop, see ``PeerNode.request_reload``). The raft options, URLs,
ident and data directory are fixed for the life of
the process: changing them under a running Raft peer would break the timing and identity
assumptions the other peers make. So the cluster file is re-read only to tell the operator
what differs and needs a restart, or that the file no longer loads, all in **one** event,
``sighup_handled``. The handler runs in the main thread between two bytecodes (CPython
delivers signals there) and touches no peer state, so it cannot disturb the event loop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from raftlog.config import PeerSettings
from raftlog.errors import ConfigError
from raftlog.log import log_file_path, reopen_log_file


def changed_settings(running: PeerSettings, on_disk: PeerSettings) -> list[str]:
    """Names of the settings (raft options by their option name) that differ."""
    changed = [
        field.name
        for field in dataclasses.fields(running)
        if field.name != "options" and getattr(running, field.name) != getattr(on_disk, field.name)
    ]
    changed += [
        field.name
        for field in dataclasses.fields(running.options)
        if getattr(running.options, field.name) != getattr(on_disk.options, field.name)
    ]
    return changed


class HangupHandler:
    """The SIGHUP handler: ``signal.signal(signal.SIGHUP, HangupHandler(...))``.

    ``reload_settings`` re-reads the cluster file with the same command-line overrides the
    peer started with (so an override is not reported as a change).
    """

    def __init__(
        self, running: PeerSettings, reload_settings: Callable[[], PeerSettings], log: Any
    ) -> None:
        self._running = running
        self._reload = reload_settings
        self._log = log
        self.also: Callable[[], None] | None = None
        """Called first on every SIGHUP once the node runs; must only set a flag."""

    def __call__(self, _signum: int, _frame: object) -> None:
        if self.also is not None:
            self.also()
        fields: dict[str, Any] = {}
        try:
            fields["log_reopened"] = reopen_log_file()
        except OSError as exc:  # the old descriptor stays in use: logging keeps working
            fields["log_reopened"] = False
            fields["log_error"] = exc.strerror or str(exc)
        fields["log_file"] = log_file_path()
        try:
            changed = changed_settings(self._running, self._reload())
        except (ConfigError, ValueError, OSError) as exc:
            self._log.warning("sighup_handled", config_error=str(exc), **fields)
            return
        if changed:
            self._log.warning("sighup_handled", restart_required=changed, **fields)
        else:
            self._log.info("sighup_handled", config_unchanged=True, **fields)
