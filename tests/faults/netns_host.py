"""A second "host" for fault tests: a network namespace joined to this one by a veth pair.
It can *vanish* -- its address is taken away, so what is sent to it is dropped without a
reset or an ICMP answer, and nothing leaves it -- as when a client's machine loses power
(a relay on loopback cannot do that: its kernel still answers TCP; taking the link down
cannot either: the sender's kernel then fails to send, and TCP does not count a probe it
could not send). :meth:`OtherHost.reboot` brings it back with the same address and none of
its old connections. Needs root and ``ip`` (iproute2); :func:`netns_or_skip` skips clearly
where either is missing.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

_SERIAL = itertools.count()


def _ip(*args: str, namespace: str | None = None) -> None:
    prefix = ["ip", "netns", "exec", namespace] if namespace else []
    subprocess.run([*prefix, "ip", *args], check=True, capture_output=True, timeout=10)


@dataclass
class OtherHost:
    """The namespace ``name``, reached at ``address`` from here (``local`` is this side)."""

    name: str
    address: str
    local: str
    _outer: str
    _inner: str

    def vanish(self) -> None:
        """Take the namespace's address away: it neither answers nor sends any more. Its
        link address stays known here (a permanent neighbour entry), so what this side
        sends still leaves -- and is lost -- rather than failing in ARP, which TCP would
        take for a local failure and not count as an unanswered probe."""
        shown = subprocess.run(["ip", "netns", "exec", self.name, "ip", "-o", "link", "show",
                                "dev", self._inner], check=True, capture_output=True,
                               text=True, timeout=10).stdout
        mac = shown.split("link/ether", 1)[1].split()[0]
        _ip("neigh", "replace", self.address, "lladdr", mac, "dev", self._outer,
            "nud", "permanent")
        _ip("addr", "del", f"{self.address}/30", "dev", self._inner, namespace=self.name)

    def reboot(self) -> None:
        """The namespace anew (its sockets, and anything they would still send, gone), at
        the same address."""
        _remove(self.name, self._outer)
        _make(self.name, self._outer, self._inner, self.local, self.address)

    def python(self, *args: str) -> subprocess.Popen[str]:
        """This interpreter run inside the namespace with ``args``."""
        return subprocess.Popen(["ip", "netns", "exec", self.name, sys.executable, *args],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)


def _make(name: str, outer: str, inner: str, local: str, address: str) -> None:
    _ip("netns", "add", name)
    _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
    _ip("link", "set", inner, "netns", name)
    _ip("addr", "add", f"{local}/30", "dev", outer)
    _ip("link", "set", outer, "up")
    _ip("addr", "add", f"{address}/30", "dev", inner, namespace=name)
    _ip("link", "set", inner, "up", namespace=name)
    _ip("link", "set", "lo", "up", namespace=name)


def _remove(name: str, outer: str) -> None:
    subprocess.run(["ip", "link", "del", outer], check=False, capture_output=True, timeout=10)
    subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True, timeout=10)


@contextmanager
def netns_or_skip() -> Iterator[OtherHost]:
    """A fresh :class:`OtherHost`, removed afterwards; a skip saying why where it cannot be
    made."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2's ip (network namespaces)")
    serial = next(_SERIAL)
    tag = f"{os.getpid() % 100_000}x{serial}"
    name, outer, inner = f"raftlog-{tag}", f"rlo{tag}", f"rli{tag}"
    subnet = f"10.{200 + serial % 50}.{os.getpid() % 250}"
    local, address = f"{subnet}.1", f"{subnet}.2"
    try:
        _make(name, outer, inner, local, address)
    except (subprocess.CalledProcessError, OSError) as exc:
        _remove(name, outer)
        pytest.skip(f"network namespaces unavailable: {exc}")
    try:
        yield OtherHost(name, address, local, outer, inner)
    finally:
        _remove(name, outer)
