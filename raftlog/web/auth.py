"""Who is calling: a bearer token mapped to a client of the allowlist (docs/rest.md).

Why the same allowlist as the ZeroMQ side: one list of clients, one role model (reader <
writer < admin) and one set of topic ACLs, so a client has the same rights whichever door it
uses. The allowlist holds each token's SHA-256 (``token_sha256``); the token itself is only
with the client. In a plaintext cluster (no ``[security] curve``) the ZeroMQ side admits
everyone, and so does REST.

The REST side re-reads the allowlist when the file changes (checked at most once a second):
the HTTP thread cannot see the peer's SIGHUP, and a revoked token must stop working without a
restart. A bad file keeps the previous policy, as the ZeroMQ side does.
"""

from __future__ import annotations

import base64
import binascii
import time
from typing import Final

import structlog
from aiohttp import web

from raftlog.errors import ConfigError
from raftlog.security.policy import AccessPolicy, Principal, Role
from raftlog.security.settings import PeerSecurity
from raftlog.web.errors import RestError

RELOAD_CHECK: Final = 1.0
"""Seconds between two looks at the allowlist's modification time."""

log = structlog.get_logger("raftlog.rest")


def token_of(request: web.Request) -> str:
    """The request's token: ``Authorization: Bearer TOKEN``, or HTTP Basic with the token
    as the password (what a browser sends after asking for it: the status page); "" when
    there is none."""
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    scheme = scheme.lower()
    if scheme == "bearer":
        return value.strip()
    if scheme == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            return ""
        return decoded.partition(":")[2].strip()
    return ""


class Authenticator:
    """Maps a request's ``Authorization: Bearer TOKEN`` to a principal and checks rights."""

    def __init__(self, security: PeerSecurity | None) -> None:
        self._security = security
        self._policy: AccessPolicy | None = None
        self._stamp: float | None = None
        self._checked = 0.0
        if security is not None:
            self._policy = security.load_policy()
            self._stamp = self._mtime()

    @property
    def enabled(self) -> bool:
        """True in a secure cluster: every request needs a token."""
        return self._security is not None

    def _mtime(self) -> float | None:
        path = self._security.clients_file if self._security is not None else None
        try:
            return path.stat().st_mtime if path is not None else None
        except OSError:
            return None

    def _fresh_policy(self) -> AccessPolicy | None:
        now = time.monotonic()
        if self._security is not None and now - self._checked >= RELOAD_CHECK:
            self._checked = now
            stamp = self._mtime()
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._policy = self._security.load_policy()
                    log.info("rest_allowlist_reloaded")
                except ConfigError as exc:
                    log.warning("rest_allowlist_reload_failed", error=str(exc))
        return self._policy

    def token_principal(self, token: str) -> Principal | None:
        """The client ``token`` belongs to under the current allowlist (None: unknown or
        security off): what the Kafka listener's SASL/PLAIN checks a password against."""
        policy = self._fresh_policy()
        return None if policy is None or not token else policy.token_principal(token)

    def principal(self, request: web.Request) -> Principal | None:
        """The caller (None: security is off, everything is allowed); 401 without a known
        token."""
        policy = self._fresh_policy()
        if policy is None:
            return None
        token = token_of(request)
        if not token:
            raise RestError(401, "Unauthenticated", "send Authorization: Bearer TOKEN")
        found = policy.token_principal(token)
        if found is None:
            raise RestError(401, "Unauthenticated", "unknown token (revoked?)")
        return found

    def require(
        self,
        request: web.Request,
        role: Role,
        *,
        publish: str | None = None,
        read: str | None = None,
    ) -> Principal | None:
        """The caller if it has ``role`` (and the right to publish to / read the given log
        topic); 401 without a token, 403 without the right."""
        who = self.principal(request)
        if who is None:
            return None
        if who.role is None or who.role < role:
            have = "none" if who.role is None else who.role.name.lower()
            raise RestError(403, "Forbidden",
                            f"{who.name} has role {have}; this request needs role "
                            f"{role.name.lower()}")
        if publish is not None and not who.publish.allows(publish):
            raise RestError(403, "Forbidden", f"{who.name} may not publish to topic {publish!r}")
        if read is not None and not who.read.allows(read):
            raise RestError(403, "Forbidden", f"{who.name} may not read topic {read!r}")
        return who

    def may_read(self, who: Principal | None, topic: str) -> bool:
        """For listings: whether ``who`` may see ``topic`` (True when security is off)."""
        return who is None or who.read.allows(topic)
