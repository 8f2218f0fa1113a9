"""The kernel's table of this network namespace's IPv4 TCP connections (``/proc/net/tcp``),
as the tests that check what the kernel does with a peer's connections read it: which are
established, what is unacknowledged, which timer runs (1 retransmission, 2 keepalive).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

ESTABLISHED: Final = "01"
KEEPALIVE: Final = 2
"""``tr`` of a connection whose keepalive timer runs."""
USER_HZ: Final = 100
"""The clock ticks of the timer column."""


@dataclass(frozen=True, slots=True)
class TcpRow:
    """One established connection as the kernel reports it."""

    local: tuple[str, int]
    remote: tuple[str, int]
    unacked: int
    """Bytes sent and not yet acknowledged (``tx_queue``)."""
    timer: int
    """0 none, 1 retransmission, 2 keepalive (``tr``)."""
    when: int
    """Clock ticks until the timer fires."""


def _endpoint(field: str) -> tuple[str, int]:
    address, port = field.split(":")
    octets = bytes.fromhex(address)[::-1]  # the kernel writes the address little-endian
    return ".".join(str(octet) for octet in octets), int(port, 16)


def established() -> list[TcpRow]:
    """Every established IPv4 TCP connection of this namespace, now."""
    rows = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] != ESTABLISHED:
            continue
        kind, when = fields[5].split(":")
        rows.append(TcpRow(_endpoint(fields[1]), _endpoint(fields[2]),
                           int(fields[4].split(":")[0], 16), int(kind, 16), int(when, 16)))
    return rows


def connection(local_port: int, *, remote_port: int | None = None,
               remote_ip: str | None = None) -> TcpRow | None:
    """The established connection on ``local_port`` from that remote (None: not there)."""
    for row in established():
        if row.local[1] == local_port and remote_port in (None, row.remote[1]) and (
                remote_ip in (None, row.remote[0])):
            return row
    return None
