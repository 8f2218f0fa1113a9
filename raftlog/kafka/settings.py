"""The Kafka listener's settings: ``kafka_url`` per peer and the ``[kafka]`` table.

Why its own module: ``raftlog.config`` reads the cluster file for every part of the peer;
what the Kafka side needs (every peer's listener, for Metadata; its options) is parsed here
and handed over as one frozen value, so config.py carries one call and one field.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Final

from raftlog.errors import ConfigError
from raftlog.observability.http_settings import positive_ints, share_cap

DEFAULT_MAX_REQUEST_BYTES: Final = 100 * 1024 * 1024
"""A Kafka request larger than this is refused and its connection closed (Kafka's
``socket.request.max.bytes`` default), before any of it is buffered."""

FD_SHARE: Final = 0.125
"""The share of ``RLIMIT_NOFILE`` the Kafka listener may use for connections (the ROUTER
keeps about half, the HTTP listener at most half of the rest by default: docs/kafka.md)."""
LIMIT_DEFAULTS: Final = {
    "max_connections": 1000,
    "max_connections_per_address": 256,
    "first_request_timeout_ms": 10_000,
    "idle_timeout_ms": 600_000,
    "send_timeout_ms": 60_000,
}
"""The connection limits of ``[kafka]`` and their defaults (``idle_timeout_ms`` is Kafka's
own ``connections.max.idle.ms``)."""
MEMORY_DEFAULTS: Final = {
    "fetch_max_bytes": 57_671_680,
    "fetch_memory_bytes": 128 * 1024 * 1024,
    "request_memory_bytes": 256 * 1024 * 1024,
}
"""The memory limits of ``[kafka]``: the record bytes of one Fetch answer at most (Kafka's
broker ``fetch.max.bytes`` and its default, 55 MiB; a request's own ``max_bytes`` only
lowers it), of all answers the listener holds at once (``raftlog.kafka.fetch_memory``), and
of the request frames all connections hold at once (Kafka's ``queued.max.request.bytes``,
unbounded there by default)."""
MIN_FETCH_MEMORY: Final = 4 * 1024 * 1024
"""``fetch_memory_bytes`` must hold one partition read (``fetch_memory.READ_RESERVE``; a
literal here, since ``raftlog.config`` imports this module and the read budget's module is
heavy; a unit test keeps them equal)."""
GROUP_LIMIT_DEFAULTS: Final = {
    "group_min_session_timeout_ms": 6_000,
    "group_max_session_timeout_ms": 1_800_000,
    "group_max_size": 1_000,
    "max_group_members": 10_000,
    "max_group_state_bytes": 64 * 1024 * 1024,
}
"""The group coordinator's limits of ``[kafka]`` and their defaults (the first three are
Kafka's own broker settings and defaults, but for ``group_max_size``: unlimited in Kafka).
Why: membership is soft state in the leader's memory that clients create, and a JoinGroup
flood with big member metadata and a session of days once grew a leader by 60 MiB/s."""


@dataclass(frozen=True, slots=True)
class GroupLimits:
    """What the Kafka group coordinator holds at most, and the sessions it accepts."""

    min_session_ms: int = GROUP_LIMIT_DEFAULTS["group_min_session_timeout_ms"]
    """A JoinGroup asking a shorter session timeout gets INVALID_SESSION_TIMEOUT."""
    max_session_ms: int = GROUP_LIMIT_DEFAULTS["group_max_session_timeout_ms"]
    """A JoinGroup asking a longer one gets INVALID_SESSION_TIMEOUT: a vanished member
    holds its place (and its metadata) for at most this long."""
    max_size: int = GROUP_LIMIT_DEFAULTS["group_max_size"]
    """Members of one group; a new member past it gets GROUP_MAX_SIZE_REACHED."""
    max_members: int = GROUP_LIMIT_DEFAULTS["max_group_members"]
    """Members of all groups together; a new member past it gets COORDINATOR_NOT_AVAILABLE
    (retriable: clients back off and try again)."""
    max_state_bytes: int = GROUP_LIMIT_DEFAULTS["max_group_state_bytes"]
    """Bytes of client-chosen data held for all members (ids, protocol metadata,
    assignments); a join or assignment past it gets COORDINATOR_NOT_AVAILABLE."""


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    """This peer's Kafka listener and what Metadata tells clients about the others."""

    url: str
    """``tcp://HOST:PORT`` this peer's listener binds and advertises."""
    brokers: tuple[tuple[str, str], ...]
    """(peer id, kafka_url) of every peer in the file that has one."""
    auto_create_topics: bool = False
    """Produce/Metadata to an unknown topic creates it (``[kafka] auto_create_topics``); off
    by default, so a typo in a topic name is an error rather than a new topic."""
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    sasl: bool = False
    """``sasl_ssl://``: TLS with the ``[http]`` certificate, then SASL/PLAIN whose password
    is a REST token of the allowlist (a secure cluster's only Kafka door)."""
    max_connections: int = LIMIT_DEFAULTS["max_connections"]
    """Connections open at once; past it a new one displaces an idle one, or is closed
    (``raftlog.observability.guard``: a connection flood once used up the peer's
    descriptors and took its ZeroMQ port down)."""
    max_connections_per_address: int = LIMIT_DEFAULTS["max_connections_per_address"]
    """Connections open at once from one source address."""
    first_request_timeout_ms: int = LIMIT_DEFAULTS["first_request_timeout_ms"]
    """A new connection (or TLS handshake) that has not completed a request by then is
    closed: a silent or trickling connection cannot hold a descriptor for long."""
    idle_timeout_ms: int = LIMIT_DEFAULTS["idle_timeout_ms"]
    """A connection without a request for this long is closed, as a Kafka broker does
    (clients reconnect when they need to); one whose client vanished goes with it."""
    send_timeout_ms: int = LIMIT_DEFAULTS["send_timeout_ms"]
    """A connection whose client takes none of its answer for this long is aborted and
    the answer freed (twice Kafka clients' request timeout; the connection guard)."""
    fetch_max_bytes: int = MEMORY_DEFAULTS["fetch_max_bytes"]
    """Record bytes of one Fetch answer at most (the first record is always sent)."""
    fetch_memory_bytes: int = MEMORY_DEFAULTS["fetch_memory_bytes"]
    """Record bytes of all Fetch answers being built or sent at once."""
    request_memory_bytes: int = MEMORY_DEFAULTS["request_memory_bytes"]
    """Bytes of request frames being read or handled at once, all connections together; a
    connection whose next frame does not fit is not read until it does (twenty connections
    sending 100 MiB frames once held 2 GB of a peer)."""
    groups: GroupLimits = GroupLimits()
    """The group coordinator's limits (``group_*`` and ``max_group_*`` keys)."""

    @property
    def header_timeout_ms(self) -> int:
        """``first_request_timeout_ms`` under the name the connection guard reads."""
        return self.first_request_timeout_ms

    def connection_cap(self, nofile: int | None = None) -> int:
        """The connections the listener really admits: ``max_connections``, but at most
        ``FD_SHARE`` of the soft ``RLIMIT_NOFILE`` (``nofile``, read when None)."""
        return share_cap(self.max_connections, FD_SHARE, nofile)


def node_id(peer_id: str) -> int:
    """The Kafka broker id of a raftlog peer: the id itself when it is a small integer
    (``"1"`` -> 1, what people expect), otherwise a stable 31-bit hash of it."""
    if peer_id.isdigit() and int(peer_id) < 2**31:
        return int(peer_id)
    return zlib.crc32(peer_id.encode()) & 0x7FFFFFFF


SCHEMES: Final = ("tcp://", "sasl_ssl://")


def split_kafka_url(url: str) -> tuple[str, int]:
    """(host, port) of a validated ``kafka_url``."""
    host, _, port = url.partition("://")[2].rpartition(":")
    return host.strip("[]"), int(port)


def validate_kafka_url(url: object, what: str) -> str:
    """``tcp://HOST:PORT`` (plaintext) or ``sasl_ssl://HOST:PORT`` with a concrete host
    (clients are told to connect to it)."""
    if not isinstance(url, str) or not url.startswith(SCHEMES):
        raise ConfigError(f"{what} must look like tcp://HOST:PORT or sasl_ssl://HOST:PORT, "
                          f"got {url!r}")
    host, _, port = url.partition("://")[2].rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ConfigError(f"{what} must look like tcp://HOST:PORT or sasl_ssl://HOST:PORT, "
                          f"got {url!r}")
    if host in ("*", "0.0.0.0", "[::]"):
        raise ConfigError(f"{what}: clients connect to this address; name the host")
    return url


def kafka_settings(
    doc: dict[str, Any], source: str, raw_peers: list[Any], peer_id: str, *, secure: bool
) -> KafkaSettings | None:
    """This peer's Kafka settings, or None when it has no ``kafka_url`` (listener off).

    A plaintext (``tcp://``) Kafka listener on a secure (CURVE) cluster would be a door
    around the allowlist: refused with a clear error; such a cluster uses ``sasl_ssl://``.
    SASL on a plaintext cluster is refused too: there is no allowlist to check tokens in."""
    table = doc.get("kafka", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [kafka] must be a table")
    unknown = set(table) - {"auto_create_topics", "max_request_bytes", *LIMIT_DEFAULTS,
                            *MEMORY_DEFAULTS, *GROUP_LIMIT_DEFAULTS}
    if unknown:
        raise ConfigError(f"{source}: [kafka] has unknown key(s) {sorted(unknown)}")
    auto = table.get("auto_create_topics", False)
    if not isinstance(auto, bool):
        raise ConfigError(f"{source}: [kafka] auto_create_topics must be true or false")
    limit = table.get("max_request_bytes", DEFAULT_MAX_REQUEST_BYTES)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1024:
        raise ConfigError(f"{source}: [kafka] max_request_bytes must be an integer >= 1024")
    limits = positive_ints(table, LIMIT_DEFAULTS, f"{source}: [kafka]")
    groups = _group_limits(table, source)
    memory = positive_ints(table, MEMORY_DEFAULTS, f"{source}: [kafka]")
    if memory["fetch_memory_bytes"] < MIN_FETCH_MEMORY:
        raise ConfigError(f"{source}: [kafka] fetch_memory_bytes must be at least "
                          f"{MIN_FETCH_MEMORY} (one partition read)")
    brokers: list[tuple[str, str]] = []
    mine: str | None = None
    ids: dict[int, str] = {}
    for raw in raw_peers:
        if not isinstance(raw, dict) or raw.get("kafka_url") is None:
            continue
        pid = str(raw.get("id"))
        url = validate_kafka_url(raw["kafka_url"], f"{source}: peer {pid} kafka_url")
        other = ids.setdefault(node_id(pid), pid)
        if other != pid:
            raise ConfigError(f"{source}: peers {other} and {pid} map to one Kafka broker id")
        brokers.append((pid, url))
        if pid == peer_id:
            mine = url
    if mine is None:
        return None
    sasl = mine.startswith("sasl_ssl://")
    if secure and not sasl:
        raise ConfigError(
            f"{source}: peer {peer_id} has a plaintext kafka_url ({mine}) on a secure "
            "cluster: it would bypass CURVE and the allowlist; use sasl_ssl://HOST:PORT "
            "(TLS with the [http] certificate, SASL/PLAIN with a REST token; docs/kafka.md)"
        )
    if sasl and not secure:
        raise ConfigError(
            f"{source}: peer {peer_id} has a sasl_ssl:// kafka_url on a plaintext cluster: "
            "SASL checks REST tokens of the allowlist, which needs [security] curve"
        )
    return KafkaSettings(mine, tuple(brokers), auto, limit, sasl, groups=groups, **memory,
                         **limits)


def _group_limits(table: dict[str, Any], source: str) -> GroupLimits:
    ints = positive_ints(table, GROUP_LIMIT_DEFAULTS, f"{source}: [kafka]")
    if ints["group_min_session_timeout_ms"] > ints["group_max_session_timeout_ms"]:
        raise ConfigError(f"{source}: [kafka] group_min_session_timeout_ms must not exceed "
                          "group_max_session_timeout_ms")
    return GroupLimits(ints["group_min_session_timeout_ms"],
                       ints["group_max_session_timeout_ms"], ints["group_max_size"],
                       ints["max_group_members"], ints["max_group_state_bytes"])
