"""The ``[http]`` table of a cluster file: how much a peer's HTTP listener may take.

Why a table of its own: the HTTP listener (monitoring, status page, REST) faces clients
that may be hostile or broken -- a flood of half-open connections once exhausted a peer's
file descriptors and took its ZeroMQ port down with it (issue #25). Its limits are
listener-wide (connections, timeouts, TLS, who may read the monitoring endpoints), so they
sit apart from ``[rest]``, whose limits are about REST requests. Example::

    [http]
    max_connections = 1000          # open HTTP connections at once, all clients together
    max_connections_per_address = 64   # ... from one source address
    header_timeout_ms = 10000       # a new connection must send a request's headers by then
    body_timeout_ms = 30000         # a request body must arrive by then (408 otherwise)
    idle_timeout_ms = 60000         # a kept-alive connection without a request is closed
    tls_cert = "certs/peer1.crt"    # with an https:// http_url: PEM certificate chain
    tls_key = "certs/peer1.key"     # ... and its private key (paths relative to this file)
    monitoring_token = true         # /metrics, / and /api/cluster need a token
    topic_metrics = true            # per-topic series in /metrics

Whatever ``max_connections`` says, the listener never holds more than half of the
process's ``RLIMIT_NOFILE`` (``FD_SHARE``): the other half is the reserve of the ZeroMQ
sockets, the stores and the peer's own files, so HTTP can never starve them.

Deliberately light (no aiohttp): ``raftlog.config`` imports it.
"""

from __future__ import annotations

import resource
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from raftlog.errors import ConfigError

FD_SHARE: Final = 0.5
"""The share of ``RLIMIT_NOFILE`` the HTTP listener may use for connections."""
DEFAULT_MAX_CONNECTIONS: Final = 1000
DEFAULT_PER_ADDRESS: Final = 64
DEFAULT_HEADER_TIMEOUT_MS: Final = 10_000
DEFAULT_BODY_TIMEOUT_MS: Final = 30_000
DEFAULT_IDLE_TIMEOUT_MS: Final = 60_000
DEFAULT_SEND_TIMEOUT_MS: Final = 60_000
_INTS: Final = {
    "max_connections": DEFAULT_MAX_CONNECTIONS,
    "max_connections_per_address": DEFAULT_PER_ADDRESS,
    "header_timeout_ms": DEFAULT_HEADER_TIMEOUT_MS,
    "body_timeout_ms": DEFAULT_BODY_TIMEOUT_MS,
    "idle_timeout_ms": DEFAULT_IDLE_TIMEOUT_MS,
    "send_timeout_ms": DEFAULT_SEND_TIMEOUT_MS,
}
_KNOWN: Final = frozenset({*_INTS, "tls_cert", "tls_key", "monitoring_token", "topic_metrics"})


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """The HTTP listener's limits, TLS files and monitoring access (module docstring)."""

    max_connections: int = DEFAULT_MAX_CONNECTIONS
    """Connections open at once; one more is refused at accept (503, closed)."""
    max_connections_per_address: int = DEFAULT_PER_ADDRESS
    """Connections open at once from one source address."""
    header_timeout_ms: int = DEFAULT_HEADER_TIMEOUT_MS
    """A connection (or TLS handshake) that has not completed a request's headers within
    this is closed: trickled headers cannot hold a descriptor for long."""
    body_timeout_ms: int = DEFAULT_BODY_TIMEOUT_MS
    """A request body that takes longer is refused with 408."""
    idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS
    """A kept-alive connection with no request for this long is closed."""
    send_timeout_ms: int = DEFAULT_SEND_TIMEOUT_MS
    """A connection whose client takes none of its answer for this long is aborted and
    the answer freed (a client that stops reading cannot hold the peer's memory)."""
    tls_cert: Path | None = None
    """PEM certificate chain of an ``https://`` listener."""
    tls_key: Path | None = None
    """Its private key (PEM)."""
    monitoring_token: bool | None = None
    """Whether ``/metrics``, the status page and ``/api/cluster`` need a bearer token
    (None: only in a secure cluster)."""
    topic_metrics: bool = True
    """Per-topic series in ``/metrics`` (off: topic names never appear there)."""

    def connection_cap(self, nofile: int | None = None) -> int:
        """The connections the listener really admits: ``max_connections``, but at most
        ``FD_SHARE`` of the soft ``RLIMIT_NOFILE`` (``nofile``, read when None)."""
        return share_cap(self.max_connections, FD_SHARE, nofile)


def share_cap(max_connections: int, share: float, nofile: int | None = None) -> int:
    """``max_connections``, but at most ``share`` of the soft ``RLIMIT_NOFILE`` (``nofile``,
    read when None): how each listener (HTTP, Kafka) stays within its part of the
    descriptors, so that no flood of one takes the others' or the stores'."""
    if nofile is None:
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if nofile == resource.RLIM_INFINITY or nofile <= 0:
        return max_connections
    return max(1, min(max_connections, int(nofile * share)))


def positive_ints(table: Mapping[str, Any], defaults: Mapping[str, int],
                  where: str) -> dict[str, int]:
    """Each key of ``defaults`` from ``table`` (or its default), a positive integer, or a
    one-line ``ConfigError`` naming ``where`` and the key (the listeners' limits)."""
    ints: dict[str, int] = {}
    for key, default in defaults.items():
        value = table.get(key, default)
        if type(value) is not int or value < 1:
            raise ConfigError(f"{where} {key} must be a positive integer, got {value!r}")
        ints[key] = value
    return ints


def http_settings(doc: Mapping[str, Any], source: str, base_dir: Path) -> HttpSettings:
    """The validated ``[http]`` table (defaults when absent); one-line ``ConfigError``.
    Relative TLS paths are relative to ``base_dir`` (the cluster file's directory)."""
    table = doc.get("http", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [http] must be a table")
    unknown = set(table) - _KNOWN
    if unknown:
        raise ConfigError(f"{source}: [http] unknown option(s) {sorted(unknown)}")
    ints = positive_ints(table, _INTS, f"{source}: [http]")
    paths: dict[str, Path | None] = {}
    for key in ("tls_cert", "tls_key"):
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise ConfigError(f"{source}: [http] {key} must be a file path")
        paths[key] = None if value is None else base_dir / value
    if (paths["tls_cert"] is None) != (paths["tls_key"] is None):
        raise ConfigError(f"{source}: [http] tls_cert and tls_key go together")
    flags: dict[str, bool | None] = {}
    for key in ("monitoring_token", "topic_metrics"):
        value = table.get(key)
        if value is not None and type(value) is not bool:
            raise ConfigError(f"{source}: [http] {key} must be true or false")
        flags[key] = value
    return HttpSettings(
        **ints,
        tls_cert=paths["tls_cert"],
        tls_key=paths["tls_key"],
        monitoring_token=flags["monitoring_token"],
        topic_metrics=True if flags["topic_metrics"] is None else flags["topic_metrics"],
    )


class ListenerError(RuntimeError):
    """The HTTP listener could not bind its ``http_url`` (port taken, bad address). Defined
    here, not beside the listener, so the peer's entry point can catch it without importing
    aiohttp (a peer without ``http_url`` never loads the HTTP stack)."""
