"""The test-port allocator every cluster fixture uses (``integration.cluster.free_ports``):
ports are never handed out twice in a row of calls, never come from the kernel's ephemeral
range (a connection's source port could take one before its peer binds it), and a port
something listens on is passed over."""

from __future__ import annotations

import socket

import pytest

from integration import cluster
from integration.cluster import free_ports


def test_ports_are_distinct_across_calls_and_below_the_ephemeral_range() -> None:
    lo, hi = cluster._PORTS
    if not hi:
        pytest.skip("no room below this host's ephemeral port range")
    first, second = free_ports(40), free_ports(40)
    assert len(set(first) | set(second)) == 80
    assert all(lo <= port < hi for port in first + second)
    assert free_ports(0) == []


def test_a_port_in_use_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    if not cluster._PORTS[1]:
        pytest.skip("no room below this host's ephemeral port range")
    [candidate] = free_ports(1)
    monkeypatch.setattr(cluster, "_next_port", candidate)  # offer the same port again...
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", candidate))  # ...while something holds it
        taken.listen()
        assert free_ports(1) != [candidate]
