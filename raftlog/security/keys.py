"""CURVE key files: generate and load them in ZeroMQ's certificate format.

Why the standard format: ``NAME.key`` (public) and ``NAME.key_secret`` (public + secret) as
``zmq.auth`` writes them are what every ZeroMQ tool (czmq's ``zcert``, pyzmq, …) reads, so
an operator can bring keys made elsewhere and inspect ours with any of them. The secret file
is written owner-only (0600) because whoever reads it can act as that peer or client.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.auth

from raftlog.errors import ConfigError

PUBLIC_SUFFIX = ".key"
SECRET_SUFFIX = ".key_secret"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_Z85_KEY = re.compile(r"^[0-9A-Za-z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}$")


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A CURVE key pair as z85 text (40 characters each); ``secret`` is None for a key file
    that holds only the public half."""

    public: bytes
    secret: bytes | None

    def require_secret(self, what: str) -> bytes:
        """The secret key, or a ConfigError naming ``what`` needed it."""
        if self.secret is None:
            raise ConfigError(f"{what}: the key file holds no secret key (use the .key_secret)")
        return self.secret


def check_name(name: str) -> str:
    """A key name becomes a file name: letters, digits, ``_.-``, at most 64 characters."""
    if not _NAME.match(name):
        raise ConfigError(
            f"key name {name!r} must be 1-64 letters, digits, '_', '.' or '-' "
            "(and not start with a punctuation mark)"
        )
    return name


def generate(name: str, directory: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write ``DIR/NAME.key`` and ``DIR/NAME.key_secret`` (0600); returns the secret file.

    Refuses to replace existing files unless ``overwrite``: replacing a key silently would
    lock the old holder out of the cluster (or let a stale copy keep working elsewhere)."""
    check_name(name)
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    public, secret = folder / (name + PUBLIC_SUFFIX), folder / (name + SECRET_SUFFIX)
    if not overwrite and (public.exists() or secret.exists()):
        raise ConfigError(f"key {name!r} already exists in {folder} (pass --force to replace)")
    old_umask = os.umask(0o077)
    try:
        zmq.auth.create_certificates(str(folder), name, metadata={"name": name})
    finally:
        os.umask(old_umask)
    os.chmod(secret, 0o600)
    os.chmod(public, 0o644)
    return secret


def load(path: str | os.PathLike[str]) -> KeyPair:
    """Load a certificate file (either half), or raise a one-line ConfigError."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"key file {file} does not exist")
    try:
        public, secret = zmq.auth.load_certificate(str(file))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"key file {file} is not a ZeroMQ certificate: {exc}") from None
    if public is None or not _Z85_KEY.match(public.decode("ascii", "replace")):
        raise ConfigError(f"key file {file} has no valid public-key line")
    return KeyPair(public, secret)


def parse_public(text: str, what: str) -> bytes:
    """A public key given inline as 40 z85 characters (e.g. in an allowlist)."""
    if not _Z85_KEY.match(text):
        raise ConfigError(f"{what}: {text!r} is not a 40-character z85 public key")
    return text.encode("ascii")


def resolve(reference: str, base: Path, what: str) -> KeyPair:
    """A key named in a config file: inline z85 public key, a path, or a NAME looked up as
    ``base/NAME.key_secret`` then ``base/NAME.key``."""
    if _Z85_KEY.match(reference):
        return KeyPair(reference.encode("ascii"), None)
    candidate = Path(reference)
    if not candidate.is_absolute():
        candidate = base / candidate
    if candidate.suffix in (PUBLIC_SUFFIX, SECRET_SUFFIX) or candidate.is_file():
        return load(candidate)
    for suffix in (SECRET_SUFFIX, PUBLIC_SUFFIX):
        file = candidate.with_name(candidate.name + suffix)
        if file.is_file():
            return load(file)
    raise ConfigError(f"{what}: no key {reference!r} (looked for {candidate}{{.key_secret,.key}})")


def curve_available() -> bool:
    """True when libzmq was built with CURVE (libsodium/tweetnacl); pyzmq wheels are."""
    return bool(zmq.has("curve"))
