"""``CK``: a peer's wall clock against the cluster clock (issue #24), for operators.

    request   [id, "CK", ident]
    response  [id, uint wall_ms, uint cluster_ms]     cluster_ms 0: the log holds no time yet

Any peer answers about itself. Nothing decides anything from it: raftlog takes every
time-based decision from the cluster clock carried in the log (``raftlog.cluster_clock``);
this only shows who runs a host whose clock is far off (``raftlog-admin health``, the status
page), which matters for human-facing timestamps and for mixed clusters whose reference
peers still use their own clocks. A raftlog extension (two-byte type, docs/protocol.md §10.6),
invisible to reference peers and clients.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from raftlog.errors import RaftlogError, RemoteProtocolError
from raftlog.rpc.frames import decode_uint, encode_uint

TYPE_CLOCK: Final = b"CK"

CLOCK_WARN_MS: Final = 10_000
"""A wall clock this far from the cluster clock gets a warning: NTP keeps hosts within
milliseconds, so 10 s is a step, a stopped NTP or a host booted with a wrong clock -- or, on
every peer at once, a cluster clock still catching up (at the slew) after a whole-cluster
outage."""


@dataclass(frozen=True, slots=True)
class ClockReading:
    """One peer's clocks at the moment it answered."""

    wall_ms: int
    cluster_ms: int | None
    """None: the log holds no time yet (nothing was ever stamped)."""

    @property
    def offset_ms(self) -> int | None:
        """Wall clock minus cluster clock (positive: the host runs ahead)."""
        return None if self.cluster_ms is None else self.wall_ms - self.cluster_ms


def encode_clock_reading(reading: ClockReading) -> list[bytes]:
    """The frames after the id of a ``CK`` answer."""
    return [encode_uint(reading.wall_ms), encode_uint(reading.cluster_ms or 0)]


def decode_clock_reading(frames: Sequence[bytes]) -> ClockReading:
    """A ``CK`` answer (``RemoteProtocolError`` when malformed)."""
    if len(frames) != 2:
        raise RemoteProtocolError(f"a clock answer has two frames, got {len(frames)}", 1)
    cluster = decode_uint(frames[1], 2)
    return ClockReading(decode_uint(frames[0], 1), cluster or None)


def clock_warning(peer_id: str, reading: ClockReading | None) -> str | None:
    """The operator's warning for a peer whose wall clock is far from the cluster clock."""
    offset = None if reading is None else reading.offset_ms
    if offset is None or abs(offset) < CLOCK_WARN_MS:
        return None
    side = "ahead of" if offset > 0 else "behind"
    return f"peer {peer_id} wall clock {abs(offset) / 1000:.0f}s {side} the cluster clock"


class PeerRequester(Protocol):
    """``RaftClient.peer_request``, as far as ``ask_clock`` needs it."""

    async def peer_request(
        self,
        url: str,
        msg_type: bytes,
        args: Sequence[bytes],
        *,
        fail_fast: bool = False,
        timeout: float | None = None,
    ) -> list[bytes]:
        """Send one request to the peer at ``url``; the frames after the id of its answer."""
        ...


async def ask_clock(client: PeerRequester, url: str, timeout: float) -> ClockReading | None:
    """The clocks of the peer at ``url``, or None (no answer, or a peer without ``CK``: a
    reference peer or an older raftlog stays silent)."""
    try:
        frames = await client.peer_request(url, TYPE_CLOCK, [], fail_fast=True, timeout=timeout)
        return decode_clock_reading(frames)
    except (RaftlogError, TimeoutError, OSError):
        return None
