"""SASL/PLAIN for a secure cluster's Kafka listener (``sasl_ssl://``, inside TLS).

Why PLAIN over TLS with REST tokens: one allowlist, one role model and one set of topic
ACLs for every door (ZeroMQ keys, REST tokens, Kafka): the SASL password is a REST bearer
token of ``clients.toml`` (its SHA-256 is what the file holds), the user name is only a
label, and the connection then acts as that client -- its role, its ``publish``/``read``
topic patterns and its quota -- exactly as its REST requests would. TLS (the ``[http]``
certificate) keeps the token off the wire in clear. Until a connection authenticated, the
listener answers only ApiVersions, SaslHandshake and SaslAuthenticate; anything else closes
it (what a Kafka broker does).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.errors import ErrorCode

from raftlog.kafka.protocol import Request, make
from raftlog.security.policy import Principal
from raftlog.web.auth import Authenticator

MECHANISM: Final = "PLAIN"
SASL_HANDSHAKE: Final = 17
SASL_AUTHENTICATE: Final = 36
BEFORE_AUTH: Final = frozenset({18, SASL_HANDSHAKE, SASL_AUTHENTICATE})
"""The APIs a connection may use before it authenticated."""


@dataclass(slots=True)
class Session:
    """One connection's authentication state."""

    required: bool
    mechanism: str | None = None
    who: Principal | None = None

    @property
    def admits_any(self) -> bool:
        """Whether any API may be used now (plaintext listener, or authenticated)."""
        return not self.required or self.who is not None


def handshake(session: Session, req: Request) -> Any:
    """SaslHandshake: PLAIN only."""
    ok = req.body.mechanism == MECHANISM and session.required
    if ok:
        session.mechanism = MECHANISM
    return make(req.schema, "SaslHandshakeResponse",
                error_code=ErrorCode.none if ok else ErrorCode.unsupported_sasl_mechanism,
                mechanisms=(MECHANISM,) if session.required else ())


def plain_token(auth_bytes: bytes) -> str | None:
    """The password of a PLAIN message ``[authzid] NUL user NUL password`` (None: malformed)."""
    parts = auth_bytes.split(b"\0")
    if len(parts) != 3:
        return None
    try:
        return parts[2].decode()
    except UnicodeDecodeError:
        return None


def authenticate(session: Session, auth: Authenticator, req: Request) -> Any:
    """SaslAuthenticate: the password must be a listed REST token."""
    who = None
    if session.mechanism == MECHANISM:
        token = plain_token(bytes(req.body.auth_bytes))
        who = None if token is None else auth.token_principal(token)
    if who is not None:
        session.who = who
        return make(req.schema, "SaslAuthenticateResponse", error_code=ErrorCode.none,
                    error_message=None, auth_bytes=b"",
                    session_lifetime=datetime.timedelta(0))
    message = ("SaslHandshake PLAIN first" if session.mechanism is None
               else "unknown token (the SASL/PLAIN password is a REST token of the allowlist)")
    return make(req.schema, "SaslAuthenticateResponse",
                error_code=ErrorCode.illegal_sasl_state if session.mechanism is None
                else ErrorCode.sasl_authentication_failed,
                error_message=message, auth_bytes=b"",
                session_lifetime=datetime.timedelta(0))
