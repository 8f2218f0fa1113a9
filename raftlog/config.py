"""Cluster configuration files (``cluster-configs/*.toml``) and their validation.

A file describes one cluster: its ident, where peers keep data, the peers themselves and the
raft options (docs/protocol.md §13) shared by all peers, each overridable per peer and then by CLI
flags. ``load_peer_config`` resolves everything one ``raftlog-peer`` process needs and fails
with a single clear ``ConfigError`` *before* any data directory is touched.

Example::

    [cluster]
    ident = "raftlog-local"
    data_dir = "./data"            # each peer uses <data_dir>/<id> unless it sets data_dir

    [raft]                         # cluster-wide options (defaults = the reference's)
    election_timeout_min = 200

    [[peers]]
    id = "1"
    url = "tcp://127.0.0.1:8047"   # advertised ROUTER URL (what the cluster config says)
    pub_url = "tcp://127.0.0.1:8048"
    # bind = "tcp://0.0.0.0:8047"  # optional: where to bind, if not the advertised URL
    # http_url = "http://127.0.0.1:8049"  # optional: /metrics, /healthz, /readyz, status page
    #                              # (https:// with [http] tls_cert and tls_key)
    # [peers.raft]                 # optional per-peer option overrides
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raftlog.errors import ConfigError
from raftlog.kafka.settings import KafkaSettings, kafka_settings
from raftlog.observability.http_settings import HttpSettings, http_settings
from raftlog.options import RaftOptions
from raftlog.rest.settings import RestSettings, rest_settings
from raftlog.rpc.config import validate_peer_url  # the single owner of the URL rule (§1)
from raftlog.rpc.messages import Peer
from raftlog.security.quotas import Quota, plaintext_quota
from raftlog.security.settings import PeerSecurity, peer_security


@dataclass(frozen=True, slots=True)
class PeerSettings:
    """Everything one peer process needs to start."""

    id: str
    url: str
    """Advertised ROUTER URL (may be unset for nothing: a peer always has one)."""
    bind_url: str
    pub_url: str
    pub_bind_url: str
    data_dir: Path
    ident: str
    peers: tuple[Peer, ...]
    """The seed configuration (the cluster's peers from the file)."""
    options: RaftOptions
    security: PeerSecurity | None = None
    """CURVE keys and the access policy's sources; None for a plaintext cluster."""
    http_url: str | None = None
    """Where this peer serves HTTP (/metrics, /healthz, /readyz, the status page), e.g.
    ``http://127.0.0.1:8049``; None (no ``http_url`` in the file) leaves the listener off."""
    peer_http_urls: tuple[tuple[str, str], ...] = ()
    """(peer id, http_url) of every peer in the file that has one: the status page links
    to the other members' pages."""
    ready_max_lag: int = 1000
    """``/readyz`` fails while the applied index trails the commit index by more entries
    (``ready_max_lag`` in the peer's table or in [cluster])."""
    rest: RestSettings = field(default_factory=RestSettings)
    """The REST API's namespaces and limits (the ``[rest]`` table, docs/rest.md)."""
    http: HttpSettings = field(default_factory=HttpSettings)
    """The HTTP listener's connection limits, timeouts, TLS and monitoring access (the
    ``[http]`` table, docs/operations.md)."""
    quotas: Quota | None = None
    """Quota per source address on a plaintext cluster (the ``[quotas]`` table,
    ``raftlog.security.quotas``); None: unlimited. CURVE clusters set quotas per client in
    the allowlist instead."""
    kafka: KafkaSettings | None = None
    """The Kafka-protocol listener (``kafka_url``, ``[kafka]``; docs/kafka.md); None: off."""

    @property
    def is_member(self) -> bool:
        """False for a peer started outside the seed configuration (CLIENT state, §12.5)."""
        return any(p.id == self.id for p in self.peers)


def _validate_url(url: object, what: str) -> str:
    if not isinstance(url, str):
        raise ConfigError(f"{what} must be a string, got {url!r}")
    try:
        return str(validate_peer_url(url))
    except (ValueError, ConfigError) as exc:
        raise ConfigError(f"{what}: {exc}") from None


def _validate_bind_url(url: object, what: str) -> str:
    """Bind URLs may use wildcard addresses (0.0.0.0, [::], *) unlike advertised ones."""
    if not isinstance(url, str) or not url.startswith("tcp://") or ":" not in url[6:]:
        raise ConfigError(f"{what} must look like tcp://ADDRESS:PORT, got {url!r}")
    port = url.rsplit(":", 1)[1]
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{what} has an invalid port: {url!r}")
    return url


def validate_http_url(url: object, what: str) -> str:
    """``http://HOST:PORT`` or ``https://HOST:PORT`` (no path): where a peer's HTTP
    listener binds and is reached (https: with ``[http] tls_cert``/``tls_key``)."""
    scheme = url.partition("://")[0] if isinstance(url, str) else ""
    if scheme not in ("http", "https"):
        raise ConfigError(f"{what} must look like http(s)://HOST:PORT, got {url!r}")
    assert isinstance(url, str)
    host, sep, port = url[len(scheme) + 3:].rstrip("/").rpartition(":")
    if not sep or not host or "/" in host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ConfigError(f"{what} must look like http(s)://HOST:PORT, got {url!r}")
    return f"{scheme}://{host}:{port}"


def split_http_url(url: str) -> tuple[str, int]:
    """(host, port) of a validated ``http_url`` (brackets of an IPv6 literal removed)."""
    host, _, port = url.partition("://")[2].rpartition(":")
    return host.strip("[]"), int(port)


def load_cluster_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse a TOML file; syntax errors become one-line ``ConfigError``s."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None


def _table(doc: dict[str, Any], key: str, source: str) -> dict[str, Any]:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: [{key}] must be a table")
    return value


def load_peer_config(
    path: str | os.PathLike[str],
    peer_id: str,
    *,
    url: str | None = None,
    bind_url: str | None = None,
    pub_url: str | None = None,
    pub_bind_url: str | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    ident: str | None = None,
    overrides: dict[str, Any] | None = None,
    key: str | None = None,
) -> PeerSettings:
    """Resolve the settings of ``peer_id`` from a cluster file plus CLI overrides.

    A peer id missing from the file is allowed only with an explicit ``url`` and ``pub_url``
    (a new peer joining through a membership change runs in CLIENT state until added);
    with CURVE on, such a peer also needs ``key`` (its own key pair).
    """
    source = str(path)
    doc = load_cluster_file(path)
    cluster = _table(doc, "cluster", source)
    unknown = set(doc) - {"cluster", "raft", "peers", "security", "rest", "http", "quotas",
                         "kafka"}
    if unknown:
        raise ConfigError(f"{source}: unknown section(s) {sorted(unknown)}")

    cluster_ident = ident if ident is not None else cluster.get("ident")
    if not isinstance(cluster_ident, str):
        raise ConfigError(f"{source}: [cluster] ident must be a string")

    raw_peers = doc.get("peers")
    if not isinstance(raw_peers, list) or not raw_peers:
        raise ConfigError(f"{source}: at least one [[peers]] entry is required")
    peers, found, http_urls = _read_peers(raw_peers, source, peer_id)
    options = _peer_options(doc, source, found, peer_id, overrides)
    mine = found or {}
    my_url = _own_url(url, mine, "url", peer_id, source)
    my_pub = _own_url(pub_url, mine, "pub_url", peer_id, source)
    my_bind = _validate_bind_url(bind_url or mine.get("bind") or my_url, f"peer {peer_id} bind")
    my_pub_bind = _validate_bind_url(
        pub_bind_url or mine.get("pub_bind") or my_pub, f"peer {peer_id} pub_bind"
    )

    base_dir = Path(path).resolve().parent
    security = peer_security(doc, source, base_dir, peer_id, raw_peers, key_override=key)
    quotas = plaintext_quota(doc, source)
    if quotas is not None and security is not None:
        raise ConfigError(f"{source}: [quotas] is for plaintext clusters (per source "
                          "address); with curve on, set quotas per role and client in the "
                          "allowlist ([quotas.ROLE], a client's quota = {...})")
    my_dir = _data_dir(data_dir, mine, cluster, base_dir=base_dir, peer_id=peer_id, source=source)
    my_http_url = (
        validate_http_url(http_url, f"peer {peer_id} http_url")
        if (http_url := mine.get("http_url")) is not None
        else None
    )
    http = http_settings(doc, source, base_dir)
    if my_http_url is not None and my_http_url.startswith("https:") and http.tls_cert is None:
        raise ConfigError(f"{source}: peer {peer_id} has an https:// http_url: "
                          "[http] needs tls_cert and tls_key")
    return PeerSettings(
        id=peer_id,
        url=my_url,
        bind_url=my_bind,
        pub_url=my_pub,
        pub_bind_url=my_pub_bind,
        data_dir=my_dir,
        ident=cluster_ident,
        peers=tuple(peers),
        options=options,
        security=security,
        http_url=my_http_url,
        peer_http_urls=tuple(http_urls),
        ready_max_lag=_ready_max_lag(mine.get("ready_max_lag", cluster.get("ready_max_lag"))),
        rest=rest_settings(doc, source),
        http=http,
        quotas=quotas,
        kafka=kafka_settings(doc, source, raw_peers, peer_id, secure=security is not None),
    )


def _read_peers(
    raw_peers: list[Any], source: str, peer_id: str
) -> tuple[list[Peer], dict[str, Any] | None, list[tuple[str, str]]]:
    """The ``[[peers]]`` entries checked (ids and urls unique): the peers, this peer's own
    entry (None: it is not in the file) and the peers' HTTP urls."""
    peers: list[Peer] = []
    mine: dict[str, Any] | None = None
    seen_ids: set[str] = set()
    seen_urls: set[str] = set()
    http_urls: list[tuple[str, str]] = []
    for n, raw in enumerate(raw_peers, 1):
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}: [[peers]] entry {n} must be a table")
        pid = raw.get("id")
        if not isinstance(pid, str) or not pid:
            raise ConfigError(f"{source}: [[peers]] entry {n} needs a non-empty string id")
        if pid in seen_ids:
            raise ConfigError(f"{source}: duplicate peer id {pid!r}")
        purl = _validate_url(raw.get("url"), f"{source}: peer {pid} url")
        if purl in seen_urls:
            raise ConfigError(f"{source}: duplicate peer url {purl}")
        seen_ids.add(pid)
        seen_urls.add(purl)
        peers.append(Peer(pid, purl))
        if raw.get("http_url") is not None:
            http_urls.append(
                (pid, validate_http_url(raw["http_url"], f"{source}: peer {pid} http_url"))
            )
        if pid == peer_id:
            mine = raw
    return peers, mine, http_urls


def _peer_options(
    doc: dict[str, Any],
    source: str,
    mine: dict[str, Any] | None,
    peer_id: str,
    overrides: dict[str, Any] | None,
) -> RaftOptions:
    """``[raft]``, then the peer's own ``raft`` table, then the command line; validated."""
    options = RaftOptions().with_overrides(_table(doc, "raft", source), f"{source} [raft]")
    if mine is not None:
        per_peer = mine.get("raft", {})
        if not isinstance(per_peer, dict):
            raise ConfigError(f"{source}: peer {peer_id} raft overrides must be a table")
        options = options.with_overrides(per_peer, f"{source} peer {peer_id}")
    if overrides:
        options = options.with_overrides(overrides, "command line")
    options.validate()
    return options


def _own_url(
    given: str | None, mine: dict[str, Any], field: str, peer_id: str, source: str
) -> str:
    """This peer's ``url`` or ``pub_url``: the command line's, else its entry's (a peer
    outside the configuration must be given both)."""
    value = given if given is not None else mine.get(field)
    if value is None and field == "url":
        raise ConfigError(
            f"peer id {peer_id!r} is not in {source}; a peer outside the configuration needs "
            "--url and --pub-url"
        )
    if value is None:
        raise ConfigError(f"peer {peer_id} has no {field}")
    return _validate_url(value, f"peer {peer_id} {field}")


def _data_dir(
    given: str | os.PathLike[str] | None,
    mine: dict[str, Any],
    cluster: dict[str, Any],
    *,
    base_dir: Path,
    peer_id: str,
    source: str,
) -> Path:
    """The command line's data dir, else the peer's ``data_dir`` (relative to the file),
    else ``[cluster] data_dir`` / peer id."""
    if given is not None:
        return Path(given)
    if "data_dir" in mine:
        return base_dir / str(mine["data_dir"])
    root = cluster.get("data_dir", "./data")
    if not isinstance(root, str):
        raise ConfigError(f"{source}: [cluster] data_dir must be a string")
    return Path(root) / peer_id


def _ready_max_lag(value: object) -> int:
    if value is None:
        return 1000
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"ready_max_lag must be a non-negative integer, got {value!r}")
    return value


def check_data_dir(path: Path) -> None:
    """Fail clearly if ``path`` cannot be used as a data directory (without creating it).

    Checks the nearest existing ancestor for write permission, so a bad path is reported
    before any process state or file is created.
    """
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise ConfigError(f"data dir {path}: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"data dir {path}: {probe} is not writable")
