"""Keys and the ``[security]`` table for a CURVE test cluster (see docs/security.md).

One cluster server key, one key per peer id, and client keys with roles and topic ACLs in
an allowlist file; ``write_clients`` rewrites the allowlist (a test then sends SIGHUP).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from raftlog.security import keys
from raftlog.security.policy import token_digest
from raftlog.security.settings import CurveClient


@dataclass
class ClientSpec:
    """One allowlist entry: key name, role and optional topic ACLs."""

    name: str
    role: str
    publish: list[str] | None = None
    read: list[str] | None = None
    consume: list[str] | None = None
    """Consumer groups it may consume from (issue #27; None: every group)."""
    token: str | None = None
    """A REST / monitoring bearer token of this client (its SHA-256 goes in the file)."""
    quota: str | None = None
    """Its quota as an inline TOML table, e.g. ``"{ records_per_s = 5 }"`` (issue #25)."""


@dataclass
class SecureSetup:
    """Generates every key under ``directory`` on construction."""

    directory: Path
    peer_ids: Iterable[str] = ("1", "2", "3")
    clients: list[ClientSpec] = field(
        default_factory=lambda: [ClientSpec("admin", "admin")]
    )

    def __post_init__(self) -> None:
        self.keys_dir = self.directory / "keys"
        keys.generate("cluster", self.keys_dir)
        for peer_id in self.peer_ids:
            keys.generate(self.peer_key(peer_id), self.keys_dir)
        for spec in self.clients:
            keys.generate(spec.name, self.keys_dir)
        keys.generate("outsider", self.keys_dir)  # a valid key nobody listed
        self.clients_file = self.keys_dir / "clients.toml"
        self.write_clients(self.clients)

    @staticmethod
    def peer_key(peer_id: str) -> str:
        """The key name of a peer."""
        return f"peer-{peer_id}"

    def write_clients(self, clients: Iterable[ClientSpec]) -> None:
        """(Re)write the allowlist file."""
        lines: list[str] = []
        for spec in clients:
            lines += ["[[clients]]", f'name = "{spec.name}"', f'role = "{spec.role}"']
            if spec.publish is not None:
                lines.append("publish = [" + ", ".join(f'"{t}"' for t in spec.publish) + "]")
            if spec.read is not None:
                lines.append("read = [" + ", ".join(f'"{t}"' for t in spec.read) + "]")
            if spec.consume is not None:
                lines.append("consume = [" + ", ".join(f'"{g}"' for g in spec.consume) + "]")
            if spec.token is not None:  # a token alone would make it a REST-only client
                lines.append(f'key = "{spec.name}"')
                lines.append(f'token_sha256 = "{token_digest(spec.token)}"')
            if spec.quota is not None:
                lines.append(f"quota = {spec.quota}")
        self.clients_file.write_text("\n".join(lines) + "\n")

    def toml_lines(self) -> list[str]:
        """The ``[security]`` table of the cluster file."""
        return [
            "[security]",
            "curve = true",
            f'keys_dir = "{self.keys_dir}"',
            'server_key = "cluster"',
            f'clients = "{self.clients_file}"',
            'client_key = "admin"',
        ]

    def client(self, name: str) -> CurveClient:
        """CURVE client keys for key ``name`` (a listed client, a peer or the outsider)."""
        pair = keys.load(self.keys_dir / f"{name}{keys.SECRET_SUFFIX}")
        server = keys.load(self.keys_dir / f"cluster{keys.PUBLIC_SUFFIX}")
        return CurveClient(pair.public, pair.require_secret(name), server.public)

    @property
    def admin(self) -> CurveClient:
        """The admin client's keys."""
        return self.client("admin")
