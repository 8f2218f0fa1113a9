"""The ``[security]`` table of a cluster file, resolved for a peer or for a client.

Why one shared server key with per-member client keys: every peer serves (ROUTER, PUB) with
the cluster's server key pair, so a client needs one public key to reach any member, also a
member added later; every peer also has its own key pair, with which its DEALERs connect to
the other peers, so a receiving peer knows *which* member sent a RequestVote or an
AppendEntries and refuses one sent under another member's id. Only members hold the server
secret; a client holds its own secret and the server's public key. Example::

    [security]
    curve = true
    keys_dir = "../keys"              # relative to this file
    server_key = "cluster"            # keys_dir/cluster.key_secret on every peer
    clients = "../keys/clients.toml"  # client allowlist (roles, topic ACLs); SIGHUP reloads
    client_key = "admin"              # the identity raftlog-admin uses with this file

    [[peers]]
    id = "1"
    key = "peer-1"                    # keys_dir/peer-1.key (the secret only on peer 1)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raftlog.errors import ConfigError
from raftlog.security import keys
from raftlog.security.policy import AccessPolicy, load_clients


@dataclass(frozen=True, slots=True)
class CurveServer:
    """Keys a server socket (ROUTER, PUB) needs: the cluster's server key pair."""

    public: bytes
    secret: bytes


@dataclass(frozen=True, slots=True)
class CurveClient:
    """Keys a connecting socket (DEALER, SUB) needs: its own pair and the server's public."""

    public: bytes
    secret: bytes
    server_public: bytes


@dataclass(frozen=True, slots=True)
class PeerSecurity:
    """What one peer needs to run CURVE: how to serve, how to connect, whom to admit."""

    server: CurveServer
    client: CurveClient
    peer_keys: Mapping[str, bytes]
    """Member id -> public key (every member of the file, this one included)."""
    clients_file: Path | None
    keys_dir: Path

    def load_policy(self) -> AccessPolicy:
        """Read the allowlist now (start-up and SIGHUP): members plus listed clients."""
        if self.clients_file is None:
            return AccessPolicy.build(self.peer_keys, [], [])
        allowed = load_clients(self.clients_file, self.keys_dir)
        for peer_id, key in allowed.peer_keys.items():
            known = self.peer_keys.get(peer_id)
            if known is not None and known != key:
                raise ConfigError(
                    f"{self.clients_file}: peer {peer_id} has another key in the cluster file"
                )
        members = {**allowed.peer_keys, **self.peer_keys}
        return AccessPolicy.build(members, allowed.clients, allowed.client_keys,
                                  allowed.client_tokens)


def security_table(doc: Mapping[str, Any], source: str) -> dict[str, Any] | None:
    """The validated ``[security]`` table when it turns CURVE on, else None (plaintext)."""
    table = doc.get("security")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [security] must be a table")
    unknown = set(table) - {"curve", "keys_dir", "server_key", "clients", "client_key"}
    if unknown:
        raise ConfigError(f"{source}: [security] unknown option(s) {sorted(unknown)}")
    curve = table.get("curve", False)
    if not isinstance(curve, bool):
        raise ConfigError(f"{source}: [security] curve must be true or false")
    if not curve:
        return None
    if not keys.curve_available():
        raise ConfigError(f"{source}: curve = true but this libzmq was built without CURVE")
    return table


def path_option(table: Mapping[str, Any], key: str, base: Path, source: str) -> Path | None:
    """A path option of the table, relative to ``base`` (the cluster file's folder)."""
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{source}: [security] {key} must be a non-empty string")
    path = Path(value)
    return path if path.is_absolute() else base / path


def keys_dir_of(table: Mapping[str, Any], base: Path, source: str) -> Path:
    """Where the key files named in the table live (``keys_dir``, default ``base``)."""
    return path_option(table, "keys_dir", base, source) or base


def _server_public(table: Mapping[str, Any], keys_dir: Path, source: str) -> keys.KeyPair:
    reference = table.get("server_key")
    if not isinstance(reference, str) or not reference:
        raise ConfigError(f"{source}: [security] needs server_key (the cluster's key name)")
    return keys.resolve(reference, keys_dir, f"{source}: [security] server_key")


def peer_security(
    doc: Mapping[str, Any], source: str, base: Path, peer_id: str, raw_peers: list[Any], *,
    key_override: str | None = None,
) -> PeerSecurity | None:
    """Resolve peer ``peer_id``'s security from a parsed cluster file (None: plaintext).

    Every member needs a ``key``; a peer outside the file (joining via a membership
    change) passes its own with ``key_override`` (``raftlog-peer --key``)."""
    table = security_table(doc, source)
    if table is None:
        if key_override is not None:
            raise ConfigError(f"--key given but {source} does not enable [security] curve")
        return None
    keys_dir = keys_dir_of(table, base, source)
    server = _server_public(table, keys_dir, source)
    server_secret = server.require_secret(f"{source}: [security] server_key on peer {peer_id}")
    peer_keys: dict[str, bytes] = {}
    own: keys.KeyPair | None = None
    for raw in raw_peers:
        pid = raw.get("id")
        reference = raw.get("key")
        if not isinstance(reference, str) or not reference:
            raise ConfigError(f"{source}: peer {pid} needs a key (curve is on)")
        what = f"{source}: peer {pid} key"
        pair = keys.resolve(reference, keys_dir, what)
        peer_keys[str(pid)] = pair.public
        if pid == peer_id and key_override is None:
            own = pair
    if key_override is not None:
        own = keys.resolve(key_override, keys_dir, "--key")
        peer_keys.setdefault(peer_id, own.public)
    if own is None:
        raise ConfigError(f"peer {peer_id} is not in {source}; give it a key with --key")
    secret = own.require_secret(f"peer {peer_id} key")
    return PeerSecurity(
        server=CurveServer(server.public, server_secret),
        client=CurveClient(own.public, secret, server.public),
        peer_keys=peer_keys,
        clients_file=path_option(table, "clients", base, source),
        keys_dir=keys_dir,
    )


def client_security(
    doc: Mapping[str, Any], source: str, base: Path, key: str | None = None
) -> CurveClient | None:
    """A client's CURVE keys from a cluster file: its ``client_key`` (or ``key``, e.g. the
    CLI's ``--key``) and the cluster's server public key. None when curve is off."""
    table = security_table(doc, source)
    if table is None:
        return None
    keys_dir = keys_dir_of(table, base, source)
    server = _server_public(table, keys_dir, source)
    reference = key if key is not None else table.get("client_key")
    if not isinstance(reference, str) or not reference:
        raise ConfigError(
            f"{source}: curve is on; give a client key (--key NAME or [security] client_key)"
        )
    pair = keys.resolve(reference, keys_dir, f"client key {reference!r}")
    return CurveClient(pair.public, pair.require_secret(f"client key {reference!r}"),
                       server.public)
