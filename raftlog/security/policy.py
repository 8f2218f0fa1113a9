"""Who may do what: peer keys, client keys with roles, and topic ACLs.

Why it is its own module: the same decision is needed in three places — the ZAP handler
(may this key connect at all?), the dispatcher (may this key send this message type?) and
the topic gate (may this key publish to / read this topic?) — and each must give the same
answer for the same key. The policy is an immutable value; reloading (SIGHUP) builds a new
one and swaps it in :class:`PolicyHolder` with one attribute assignment, so a request sees
either the old or the new policy, never a mix, and a revoked key is refused from its next
request on, also on a connection opened before the revocation.

Roles are cumulative: ``reader`` (RequestEntries, RequestConfig, RequestLogInfo, topic
reads, the PUB broadcast) < ``writer`` (+ RequestUpdate, topic publish) < ``admin`` (+
ConfigUpdate, compaction, topic create/update/delete). Peers are not clients: a member's key
may send the peer RPCs (RequestVote, AppendEntries, InstallSnapshot) under its own id only,
and read the log (a new peer catches up as a reader).
"""

from __future__ import annotations

import enum
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from raftlog.errors import ConfigError
from raftlog.rpc.messages import (
    TYPE_APPEND_ENTRIES,
    TYPE_CONFIG_UPDATE,
    TYPE_INSTALL_SNAPSHOT,
    TYPE_REQUEST_BROADCAST_STATE_URL,
    TYPE_REQUEST_CONFIG,
    TYPE_REQUEST_ENTRIES,
    TYPE_REQUEST_LOG_INFO,
    TYPE_REQUEST_UPDATE,
    TYPE_REQUEST_VOTE,
    TYPE_REQUEST_WEBMONITOR_URL,
)
from raftlog.rpc.topics import TYPE_DESCRIBE, TYPE_LIST, TYPE_PUBLISH, TYPE_READ
from raftlog.rpc.transactions import TYPE_TX_STATUS
from raftlog.security import keys


class Role(enum.IntEnum):
    """A client key's role; a higher role includes every right of the lower ones."""

    READER = 1
    WRITER = 2
    ADMIN = 3

    @classmethod
    def parse(cls, text: object, what: str) -> Role:
        """``"reader"``, ``"writer"`` or ``"admin"`` (case-insensitive)."""
        if isinstance(text, str) and text.upper() in cls.__members__:
            return cls[text.upper()]
        raise ConfigError(f"{what}: role must be one of reader, writer, admin; got {text!r}")


class Permission(enum.Enum):
    """What a message type needs."""

    PEER = "peer"
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


_NEEDED: Final[Mapping[bytes, Permission]] = {
    TYPE_REQUEST_VOTE: Permission.PEER,
    TYPE_APPEND_ENTRIES: Permission.PEER,
    TYPE_INSTALL_SNAPSHOT: Permission.PEER,
    TYPE_REQUEST_CONFIG: Permission.READ,
    TYPE_REQUEST_LOG_INFO: Permission.READ,
    TYPE_REQUEST_ENTRIES: Permission.READ,
    TYPE_REQUEST_BROADCAST_STATE_URL: Permission.READ,
    TYPE_REQUEST_WEBMONITOR_URL: Permission.READ,
    TYPE_READ: Permission.READ,
    TYPE_DESCRIBE: Permission.READ,
    TYPE_LIST: Permission.READ,
    TYPE_TX_STATUS: Permission.READ,
    TYPE_REQUEST_UPDATE: Permission.WRITE,
    TYPE_PUBLISH: Permission.WRITE,
    TYPE_CONFIG_UPDATE: Permission.ADMIN,
}


def needed_permission(msg_type: bytes) -> Permission:
    """The permission a request type needs; types this table does not know (extensions,
    compaction, anything a state machine might accept) need ``admin``: refusing an unknown
    type to a writer is safe, letting an unknown type through to a reader is not."""
    return _NEEDED.get(msg_type, Permission.ADMIN)


_ROLE_FOR: Final[Mapping[Permission, Role]] = {
    Permission.READ: Role.READER,
    Permission.WRITE: Role.WRITER,
    Permission.ADMIN: Role.ADMIN,
}


@dataclass(frozen=True, slots=True)
class TopicFilter:
    """Topic names or prefixes (``"pay.*"``; ``"*"`` is every topic) a key may use."""

    exact: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ("",)  # the default: every topic

    @classmethod
    def parse(cls, patterns: object, what: str) -> TopicFilter:
        """A list of names/prefix patterns; absent means every topic."""
        if patterns is None:
            return cls()
        if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
            raise ConfigError(f"{what} must be a list of topic names or 'prefix*' patterns")
        exact: set[str] = set()
        prefixes: list[str] = []
        for pattern in patterns:
            if not pattern or "*" in pattern[:-1]:
                raise ConfigError(f"{what}: {pattern!r}: '*' may only end a pattern")
            if pattern.endswith("*"):
                prefixes.append(pattern[:-1])
            else:
                exact.add(pattern)
        return cls(frozenset(exact), tuple(prefixes))

    def allows(self, topic: str) -> bool:
        """True if ``topic`` matches a name or a prefix."""
        return topic in self.exact or any(topic.startswith(p) for p in self.prefixes)

    @property
    def unrestricted(self) -> bool:
        """Every topic (the default ``*``): no topic check is needed at all."""
        return "" in self.prefixes


@dataclass(frozen=True, slots=True)
class Principal:
    """The authenticated party behind a connection: a member peer or a listed client."""

    name: str
    peer_id: str | None = None
    role: Role | None = None
    publish: TopicFilter = field(default_factory=TopicFilter)
    read: TopicFilter = field(default_factory=TopicFilter)

    def refusal(self, msg_type: bytes) -> str | None:
        """None if this principal may send ``msg_type``, else a one-line reason."""
        needed = needed_permission(msg_type)
        if needed is Permission.PEER:
            return None if self.peer_id is not None else f"{self.name} is not a member peer"
        if self.peer_id is not None:  # members read the log (catch-up), nothing else
            return None if needed is Permission.READ else f"peer {self.peer_id} is no client"
        assert self.role is not None
        role = _ROLE_FOR[needed]
        if self.role >= role:
            return None
        return f"{self.name} has role {self.role.name.lower()}; this request needs role " + (
            role.name.lower()
        )

    def may_publish(self, topic: str) -> bool:
        """Topic ACL for publishing (the role check comes first)."""
        return self.peer_id is None and self.publish.allows(topic)

    def may_read(self, topic: str) -> bool:
        """Topic ACL for reading; members may read everything (they hold the log anyway)."""
        return self.peer_id is not None or self.read.allows(topic)


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """Every key that may connect, by z85 public key."""

    principals: Mapping[bytes, Principal]

    def principal(self, user_id: bytes) -> Principal | None:
        """The principal of an authenticated connection (ZAP's User-Id is the z85 key)."""
        return self.principals.get(user_id)

    def allows_key(self, public_key: bytes) -> bool:
        """The ZAP question: may this key connect at all?"""
        return public_key in self.principals

    @classmethod
    def build(cls, peer_keys: Mapping[str, bytes], clients: Iterable[Principal],
              client_keys: Iterable[bytes]) -> AccessPolicy:
        """Peers by id -> public key, plus clients paired with their public keys. A key
        listed twice is an error: one key must not carry two sets of rights."""
        table: dict[bytes, Principal] = {}
        for peer_id, key in peer_keys.items():
            if key in table:
                raise ConfigError(f"peers {table[key].name} and {peer_id} share a public key")
            table[key] = Principal(name=f"peer {peer_id}", peer_id=peer_id)
        for principal, key in zip(clients, client_keys, strict=True):
            if key in table:
                raise ConfigError(f"client {principal.name}: its key is already used by "
                                  f"{table[key].name}")
            table[key] = principal
        return cls(table)


@dataclass(frozen=True, slots=True)
class Allowlist:
    """What an allowlist file admits: clients (with their keys, in order) and extra members
    (``[[peers]]``: id and key of a peer joining after the peers were started — SIGHUP makes
    the running peers accept it without a restart)."""

    clients: list[Principal]
    client_keys: list[bytes]
    peer_keys: dict[str, bytes]


def load_clients(path: Path, keys_dir: Path) -> Allowlist:
    """Parse an allowlist file (TOML: ``[[clients]]`` tables with name, key, role, optional
    publish/read topic patterns; ``[[peers]]`` tables with id and key); one-line ConfigError
    on anything wrong."""
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"client allowlist {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"client allowlist {path} cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"client allowlist {path} is not valid TOML: {exc}") from None
    unknown = set(doc) - {"clients", "peers"}
    if unknown:
        raise ConfigError(f"{path}: unknown section(s) {sorted(unknown)}")
    raw_clients = doc.get("clients", [])
    if not isinstance(raw_clients, list):
        raise ConfigError(f"{path}: clients must be [[clients]] tables")
    principals: list[Principal] = []
    public_keys: list[bytes] = []
    names: set[str] = set()
    for n, raw in enumerate(raw_clients, 1):
        what = f"{path}: client {n}"
        if not isinstance(raw, dict):
            raise ConfigError(f"{what} must be a table")
        extra = set(raw) - {"name", "key", "role", "publish", "read"}
        if extra:
            raise ConfigError(f"{what}: unknown field(s) {sorted(extra)}")
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{what} needs a non-empty name")
        if name in names:
            raise ConfigError(f"{path}: client name {name!r} is listed twice")
        names.add(name)
        reference = raw.get("key", name)
        if not isinstance(reference, str):
            raise ConfigError(f"{what} ({name}): key must be a string")
        pair = keys.resolve(reference, keys_dir, f"{what} ({name})")
        principals.append(
            Principal(
                name=name,
                role=Role.parse(raw.get("role"), f"{what} ({name})"),
                publish=TopicFilter.parse(raw.get("publish"), f"{what} ({name}) publish"),
                read=TopicFilter.parse(raw.get("read"), f"{what} ({name}) read"),
            )
        )
        public_keys.append(pair.public)
    return Allowlist(principals, public_keys, _extra_peers(doc.get("peers", []), path, keys_dir))


def _extra_peers(raw_peers: object, path: Path, keys_dir: Path) -> dict[str, bytes]:
    if not isinstance(raw_peers, list):
        raise ConfigError(f"{path}: peers must be [[peers]] tables")
    out: dict[str, bytes] = {}
    for n, raw in enumerate(raw_peers, 1):
        if not isinstance(raw, dict) or set(raw) != {"id", "key"}:
            raise ConfigError(f"{path}: peer {n} must be a table with exactly id and key")
        peer_id, reference = raw["id"], raw["key"]
        if not isinstance(peer_id, str) or not peer_id or not isinstance(reference, str):
            raise ConfigError(f"{path}: peer {n}: id and key must be non-empty strings")
        out[peer_id] = keys.resolve(reference, keys_dir, f"{path}: peer {peer_id}").public
    return out


class PolicyHolder:
    """The policy in force; :meth:`replace` swaps it atomically (one attribute store)."""

    def __init__(self, policy: AccessPolicy) -> None:
        self.current = policy
        self.generation = 0

    def replace(self, policy: AccessPolicy) -> None:
        """Put a newly loaded policy in force for every later handshake and request."""
        self.current = policy
        self.generation += 1
