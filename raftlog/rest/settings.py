"""The ``[rest]`` table of a cluster file: namespaces and the REST API's limits.

Why a table of its own: the REST API (``raftlog.rest``) shares the peer's HTTP listener
with monitoring, but its limits are about clients (how large a request may be, how long a
poll may wait) and its namespaces are part of the data model, so they are named where an
operator looks for them. Example::

    [rest]
    namespaces = ["default", "billing"]   # "default" always exists
    max_body_bytes = 4194304              # larger request bodies get 413
    max_wait_ms = 30000                   # the longest long-poll (waitMs) a client may ask
    request_timeout_ms = 10000            # a forwarded request without a leader: 503 after
    answer_memory_bytes = 134217728       # large answers being sent at once (503 Busy past it)
    body_memory_bytes = 67108864          # request bodies > 64 KiB being read at once

Deliberately light: ``raftlog.config`` imports it, and a peer without HTTP never loads
aiohttp because of it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from raftlog.errors import ConfigError

DEFAULT_NAMESPACE: Final = "default"
NAMESPACE_RE: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A namespace name: no ``.``, because a namespace is the part of a topic name before the
first ``.`` (docs/rest.md, "Namespaces")."""
DEFAULT_MAX_BODY_BYTES: Final = 4 * 1024 * 1024
DEFAULT_MAX_WAIT_MS: Final = 30_000
DEFAULT_REQUEST_TIMEOUT_MS: Final = 10_000
DEFAULT_ANSWER_MEMORY_BYTES: Final = 128 * 1024 * 1024
DEFAULT_BODY_MEMORY_BYTES: Final = 64 * 1024 * 1024
_KNOWN: Final = frozenset({"namespaces", "max_body_bytes", "max_wait_ms", "request_timeout_ms",
                           "answer_memory_bytes", "body_memory_bytes"})


@dataclass(frozen=True, slots=True)
class RestSettings:
    """What the REST API of every peer of a cluster file allows."""

    namespaces: tuple[str, ...] = (DEFAULT_NAMESPACE,)
    """Namespaces that exist; any other gets 404 ``NamespaceNotFound``."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """Largest request body read; a larger one is refused with 413 before it is buffered."""
    max_wait_ms: int = DEFAULT_MAX_WAIT_MS
    """Upper bound of a poll's ``waitMs`` (a client asking more waits this long)."""
    request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS
    """How long a request may wait for the cluster (a leader election, a slow peer) before
    it is answered 503 ``Unavailable``."""
    answer_memory_bytes: int = DEFAULT_ANSWER_MEMORY_BYTES
    """Bytes of large answers (a poll's messages) being sent at once; past it a new large
    answer gets 503 ``Busy`` (``raftlog.rest.answer_memory``)."""
    body_memory_bytes: int = DEFAULT_BODY_MEMORY_BYTES
    """Bytes of request bodies larger than 64 KiB being read or handled at once; a body that
    does not fit waits unread, then 503 ``Busy`` (``raftlog.rest.body_memory``)."""


def _positive(table: Mapping[str, Any], key: str, default: int, source: str) -> int:
    value = table.get(key, default)
    if type(value) is not int or value < 1:
        raise ConfigError(f"{source}: [rest] {key} must be a positive integer, got {value!r}")
    return value


def rest_settings(doc: Mapping[str, Any], source: str) -> RestSettings:
    """The validated ``[rest]`` table (defaults when absent); one-line ``ConfigError``."""
    table = doc.get("rest", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [rest] must be a table")
    unknown = set(table) - _KNOWN
    if unknown:
        raise ConfigError(f"{source}: [rest] unknown option(s) {sorted(unknown)}")
    raw = table.get("namespaces", [DEFAULT_NAMESPACE])
    if not isinstance(raw, list) or not all(isinstance(n, str) for n in raw):
        raise ConfigError(f"{source}: [rest] namespaces must be a list of names")
    for name in raw:
        if not NAMESPACE_RE.fullmatch(name):
            raise ConfigError(
                f"{source}: [rest] namespace {name!r}: use 1-64 characters of A-Z a-z 0-9 _ -"
            )
    namespaces = tuple(dict.fromkeys([DEFAULT_NAMESPACE, *raw]))
    return RestSettings(
        namespaces=namespaces,
        max_body_bytes=_positive(table, "max_body_bytes", DEFAULT_MAX_BODY_BYTES, source),
        max_wait_ms=_positive(table, "max_wait_ms", DEFAULT_MAX_WAIT_MS, source),
        request_timeout_ms=_positive(
            table, "request_timeout_ms", DEFAULT_REQUEST_TIMEOUT_MS, source
        ),
        answer_memory_bytes=_positive(
            table, "answer_memory_bytes", DEFAULT_ANSWER_MEMORY_BYTES, source
        ),
        body_memory_bytes=_positive(table, "body_memory_bytes", DEFAULT_BODY_MEMORY_BYTES, source),
    )
