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
