"""What the quota check (issue #25, ``raftlog.server.quota_gate``) costs per ROUTER message.

A micro-benchmark, not a cluster run: the check is a few microseconds against a publish
round trip of ~1.5 ms (fsync included, "Security" above), far inside the run-to-run noise of
a cluster benchmark on a shared machine, so it is measured where it can be seen. Per message:
no quota set (the peer holds no gate: one ``is None`` test), a message type no quota meters,
a limited publish on a CURVE peer (principal lookup by key + token buckets), the same on a
plaintext peer (by source address), and a publish refused over quota (answer not included).
"""

from __future__ import annotations

import statistics
import timeit
from typing import Any

from raftlog.rpc.messages import TYPE_REQUEST_LOG_INFO
from raftlog.security.policy import AccessPolicy, PolicyHolder, Principal, Role
from raftlog.security.quotas import Quota, QuotaBook
from raftlog.server.quota_gate import QuotaGate, gate_for
from raftlog.topics.records import Record, encode_records
from raftlog.topics.wire import TYPE_PUBLISH

ROUNDS = 5
CALLS = 100_000
KEY = b"K" * 40


class _Log:
    def info(self, *_args: Any, **_fields: Any) -> None:
        """Discard (the gate logs one refusal in a hundred)."""


def _gate(quota: Quota, *, secure: bool) -> QuotaGate:
    holder = None
    if secure:
        principal = Principal("bench", role=Role.WRITER, quota=quota)
        holder = PolicyHolder(AccessPolicy.build({}, [principal], [KEY]))
    gate = gate_for(None if secure else quota, holder, QuotaBook(),
                    stream_open=lambda _k: True, read_waiting=lambda _k: True, log=_Log())
    assert gate is not None
    return gate


def _per_call_us(call: Any) -> float:
    runs = [timeit.timeit(call, number=CALLS) / CALLS * 1e6 for _ in range(ROUNDS)]
    return statistics.median(runs)


def run() -> str:
    """The Markdown section."""
    publish = [b"r", b"id", TYPE_PUBLISH, b"ident", encode_records([Record("t", b"v" * 100)])]
    info = [b"r", b"id", TYPE_REQUEST_LOG_INFO, b"ident", b""]
    user = KEY.decode()
    free = Quota(records_per_s=1e12, bytes_per_s=1e15)
    none_gate: QuotaGate | None = None
    secure, plain = _gate(free, secure=True), _gate(free, secure=False)
    tight = _gate(Quota(records_per_s=1), secure=True)
    tight.check(publish, user)  # spend the burst: every later call is refused
    noop = _per_call_us(lambda: None)

    def unlimited() -> None:
        if none_gate is not None:
            none_gate.check(publish, user)

    rows = [
        ("no quota set (no gate)", _per_call_us(unlimited)),
        ("RequestLogInfo, quotas set (not metered)",
         _per_call_us(lambda: secure.check(info, user))),
        ("publish, CURVE key with a quota", _per_call_us(lambda: secure.check(publish, user))),
        ("publish, plaintext per address", _per_call_us(lambda: plain.check(publish, "10.0.0.1"))),
        ("publish refused over quota", _per_call_us(lambda: tight.check(publish, user))),
    ]
    lines = [
        "## Quotas per principal: cost of the check (issue #25)",
        "",
        "Per ROUTER message, medians of 5 rounds of 100,000 calls (the loop's own cost, "
        f"{noop:.3f} µs, subtracted). A publish round trip costs ~1,500 µs (fsync included).",
        "",
        "| message | µs per message |",
        "|---|---:|",
        *(f"| {name} | {max(0.0, us - noop):.3f} |" for name, us in rows),
    ]
    return "\n".join(lines) + "\n"
