"""The "access denied" answer of a CURVE peer (a raftlog extension; plaintext peers and the
reference never send it).

Why an answer rather than silence: a refused client that hears nothing retries until its
timeout and then blames the network; with this answer it fails at once with the reason.
Layout after the echoed msgid: ``[DENIED_MARKER, reason (utf-8)]``. The marker is a frame
no ØMQ RAFT response starts with (the first frame after the msgid is always a msgpack value
or a short status, never these 14 bytes), so a client checks it before it decodes the
response of the request type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

DENIED_MARKER: Final = b"!ACCESS-DENIED"
MAX_REASON_BYTES: Final = 512


@dataclass(frozen=True, slots=True)
class AccessDenied:
    """A secure peer's refusal of one request (wrong role, revoked key, impersonation)."""

    reason: str


def encode_access_denied(msg: AccessDenied) -> list[bytes]:
    """The frames after the echoed msgid."""
    return [DENIED_MARKER, msg.reason.encode("utf-8")[:MAX_REASON_BYTES]]


def access_denied_reason(frames: list[bytes]) -> str | None:
    """The reason if ``frames`` (a response as a DEALER receives it: msgid first) is an
    access-denied answer, else None."""
    if len(frames) >= 2 and frames[1] == DENIED_MARKER:
        return frames[2].decode("utf-8", "replace") if len(frames) > 2 else "access denied"
    return None


QUOTA_MARKER: Final = b"!QUOTA-EXCEEDED"


@dataclass(frozen=True, slots=True)
class QuotaRefusal:
    """A peer's refusal of one request over its principal's quota (issue #25): nothing was
    proposed, and the same request may be sent again after ``retry_after_ms``.

    Layout after the echoed msgid: ``[QUOTA_MARKER, retry_after_ms (ascii digits), kind,
    reason]``; like the access-denied answer it starts with a frame no ØMQ RAFT response
    starts with. It is sent only to clients that can understand it (docs/protocol.md,
    "Quota refusals"): a CURVE client (reference clients cannot connect to a CURVE
    cluster), or a raftlog extension request; a reference client's RequestUpdate over
    quota on a plaintext cluster is dropped instead, and its transport retries after its
    response timeout -- a back-off it already has, where any answer it knows would read as
    "not leader"."""

    retry_after_ms: int
    kind: str
    reason: str


def encode_quota_refusal(msg: QuotaRefusal) -> list[bytes]:
    """The frames after the echoed msgid."""
    return [QUOTA_MARKER, str(msg.retry_after_ms).encode(), msg.kind.encode(),
            msg.reason.encode("utf-8")[:MAX_REASON_BYTES]]


def quota_refusal_of(frames: list[bytes]) -> QuotaRefusal | None:
    """The refusal if ``frames`` (msgid first) is a quota refusal, else None; a malformed
    retry-after reads as 1 s (a peer never makes its client spin)."""
    if len(frames) < 2 or frames[1] != QUOTA_MARKER:
        return None
    try:
        retry = int(frames[2]) if len(frames) > 2 else 1000
    except ValueError:
        retry = 1000
    kind = frames[3].decode("utf-8", "replace") if len(frames) > 3 else "quota"
    reason = frames[4].decode("utf-8", "replace") if len(frames) > 4 else "quota exceeded"
    return QuotaRefusal(max(0, retry), kind, reason)
