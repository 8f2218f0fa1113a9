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
ConfigUpdate, compaction, topic create/update/delete). A member's key may send the peer RPCs
(RequestVote, AppendEntries, InstallSnapshot) under its own id only, read the log (a new
peer catches up as a reader), and send client requests: a peer's REST gateway
(``raftlog.rest``) forwards writes to the leader with its member key after checking the
HTTP caller's token itself. That grants a member nothing it lacks: a member can already
become leader and append what it likes (docs/security.md, "a compromised peer host").

A client may also hold a REST bearer token: the allowlist stores its SHA-256 (never the
token), and the REST API looks the caller up by it with the same role and topic ACLs.
"""

from __future__ import annotations

import enum
import hashlib
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from raftlog.errors import ConfigError
from raftlog.registry import ROWS, Permission
from raftlog.security import keys
from raftlog.security.quotas import Quota, parse_role_quotas


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


_NEEDED: Final[Mapping[bytes, Permission]] = {row.code: row.permission for row in ROWS}
"""Derived from the message registry (``raftlog.registry``): one row per type."""


def needed_permission(msg_type: bytes) -> Permission:
    """The permission a request type needs (its registry row); types the registry does not
    know (anything a state machine might accept) need ``admin``: refusing an unknown
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
    consume: TopicFilter = field(default_factory=TopicFilter)
    """Consumer groups (names or ``prefix*``) it may consume from, commit or ack in (#27);
    absent: every group. Consuming also needs read on the group's topics."""
    quota: Quota | None = None
    """Its quota (role default with its own overrides; ``raftlog.security.quotas``), or
    None: unlimited. Members never have one."""

    def refusal(self, msg_type: bytes) -> str | None:
        """None if this principal may send ``msg_type``, else a one-line reason."""
        needed = needed_permission(msg_type)
        if needed is Permission.PEER:
            return None if self.peer_id is not None else f"{self.name} is not a member peer"
        if self.peer_id is not None:  # catch-up reads, and the REST gateway's requests
            return None
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
    """Every key that may connect, by z85 public key; REST tokens by their SHA-256."""

    principals: Mapping[bytes, Principal]
    tokens: Mapping[str, Principal] = field(default_factory=dict)
    """SHA-256 (lower-case hex) of a REST bearer token -> its client."""

    def token_principal(self, token: str) -> Principal | None:
        """The client a REST bearer token belongs to (None: not listed)."""
        return self.tokens.get(token_digest(token))

    def principal(self, user_id: bytes) -> Principal | None:
        """The principal of an authenticated connection (ZAP's User-Id is the z85 key)."""
        return self.principals.get(user_id)

    def allows_key(self, public_key: bytes) -> bool:
        """The ZAP question: may this key connect at all?"""
        return public_key in self.principals

    @classmethod
    def build(cls, peer_keys: Mapping[str, bytes], clients: Iterable[Principal],
              client_keys: Iterable[bytes | None],
              client_tokens: Iterable[str | None] | None = None) -> AccessPolicy:
        """Peers by id -> public key, plus clients paired with their public keys (None: a
        REST-only client) and optionally their token digests. A key or token listed twice
        is an error: one credential must not carry two sets of rights."""
        table: dict[bytes, Principal] = {}
        for peer_id, key in peer_keys.items():
            if key in table:
                raise ConfigError(f"peers {table[key].name} and {peer_id} share a public key")
            table[key] = Principal(name=f"peer {peer_id}", peer_id=peer_id)
        clients = list(clients)
        tokens_in = list(client_tokens) if client_tokens is not None else [None] * len(clients)
        tokens: dict[str, Principal] = {}
        for principal, client_key, digest in zip(clients, client_keys, tokens_in, strict=True):
            if client_key is not None:
                if client_key in table:
                    raise ConfigError(f"client {principal.name}: its key is already used by "
                                      f"{table[client_key].name}")
                table[client_key] = principal
            if digest is not None:
                if digest in tokens:
                    raise ConfigError(f"client {principal.name}: its token is already used "
                                      f"by {tokens[digest].name}")
                tokens[digest] = principal
        return cls(table, tokens)


@dataclass(frozen=True, slots=True)
class Allowlist:
    """What an allowlist file admits: clients (with their keys, in order) and extra members
    (``[[peers]]``: id and key of a peer joining after the peers were started — SIGHUP makes
    the running peers accept it without a restart)."""

    clients: list[Principal]
    client_keys: list[bytes | None]
    """Each client's public key; None for a REST-only client (a token and no key)."""
    peer_keys: dict[str, bytes]
    client_tokens: list[str | None] = field(default_factory=list)
    """Each client's REST token digest (``token_sha256``), or None."""


TOKEN_DIGEST_RE: Final = re.compile(r"[0-9a-f]{64}")


def token_digest(token: str) -> str:
    """What the allowlist stores for a REST bearer token: its SHA-256, lower-case hex (so a
    leaked allowlist does not leak the tokens)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def load_clients(path: Path, keys_dir: Path) -> Allowlist:
    """Parse an allowlist file (TOML: ``[[clients]]`` tables with name, key, role, optional
    publish/read topic patterns, REST ``token_sha256`` and a ``quota`` table overriding its
    role's; ``[quotas.ROLE]`` default quotas; ``[[peers]]`` tables with id and key);
    one-line ConfigError on anything wrong."""
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"client allowlist {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"client allowlist {path} cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"client allowlist {path} is not valid TOML: {exc}") from None
    unknown = set(doc) - {"clients", "peers", "quotas"}
    if unknown:
        raise ConfigError(f"{path}: unknown section(s) {sorted(unknown)}")
    role_quotas = parse_role_quotas(
        doc.get("quotas"), str(path), tuple(r.name.lower() for r in Role)
    )
    raw_clients = doc.get("clients", [])
    if not isinstance(raw_clients, list):
        raise ConfigError(f"{path}: clients must be [[clients]] tables")
    principals: list[Principal] = []
    public_keys: list[bytes | None] = []
    digests: list[str | None] = []
    names: set[str] = set()
    for n, raw in enumerate(raw_clients, 1):
        what = f"{path}: client {n}"
        if not isinstance(raw, dict):
            raise ConfigError(f"{what} must be a table")
        extra = set(raw) - {
            "name", "key", "role", "publish", "read", "consume", "token_sha256", "quota"
        }
        if extra:
            raise ConfigError(f"{what}: unknown field(s) {sorted(extra)}")
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{what} needs a non-empty name")
        if name in names:
            raise ConfigError(f"{path}: client name {name!r} is listed twice")
        names.add(name)
        digest = raw.get("token_sha256")
        if digest is not None and (
            not isinstance(digest, str) or not TOKEN_DIGEST_RE.fullmatch(digest)
        ):
            raise ConfigError(f"{what} ({name}): token_sha256 must be 64 lower-case hex digits "
                              "(printf %s TOKEN | sha256sum)")
        # a client with a token and no key is REST-only; otherwise the key defaults to name
        reference = raw.get("key", name if digest is None else None)
        if reference is not None and not isinstance(reference, str):
            raise ConfigError(f"{what} ({name}): key must be a string")
        public = (
            None if reference is None
            else keys.resolve(reference, keys_dir, f"{what} ({name})").public
        )
        role = Role.parse(raw.get("role"), f"{what} ({name})")
        quota = role_quotas.get(role.name.lower(), Quota())
        if "quota" in raw:
            own = Quota.parse(raw["quota"], f"{what} ({name}) quota", complete=False)
            quota = quota.over(own).checked(f"{what} ({name}) quota")
        principals.append(
            Principal(
                name=name,
                role=role,
                publish=TopicFilter.parse(raw.get("publish"), f"{what} ({name}) publish"),
                read=TopicFilter.parse(raw.get("read"), f"{what} ({name}) read"),
                consume=TopicFilter.parse(raw.get("consume"), f"{what} ({name}) consume"),
                quota=None if quota.empty else quota,
            )
        )
        public_keys.append(public)
        digests.append(digest)
    return Allowlist(principals, public_keys, _extra_peers(doc.get("peers", []), path, keys_dir),
                     digests)


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
