"""Quotas per principal (issue #25): publish rate; concurrent streams, waiting reads and
connections.

Why one module for both listeners: a principal -- a CURVE key's client name, a REST token's
client, or on a plaintext cluster the source address -- must meet the same limits whichever
way it comes in, and the arithmetic (token buckets, caps) must be the same code. The ZeroMQ
side (``raftlog.server.router_limits``) and the REST side (``raftlog.rest``) each hold a
:class:`QuotaBook` of their own: they run on different threads, so neither shares mutable
state with the other and no lock is needed. A REST request is counted by the peer that
serves it (its forwarded publish reaches the leader under the peer's member key, which is
never limited).

Why token buckets: a bucket refills at the configured rate up to its burst (one second's
worth unless configured), so a client may publish in bursts yet not above the rate on
average, and the refusal can say exactly how long to wait (``retry_after``). A request
larger than the burst passes when the bucket is full and leaves it in debt, so no request
is refused for ever. The hot path of a limited publish is a dict lookup and a few float
operations on preallocated slots: no allocation; with no quota configured at all the
listeners hold no book and pay one ``is None`` test.

Configuration: defaults per role and overrides per client in the allowlist
(``[quotas.writer]``, a client's ``quota = {...}``; ``raftlog.security.policy``), defaults
per source address in the cluster file's ``[quotas]`` table for plaintext clusters
(:func:`plaintext_quota`). docs/operations.md §11 and docs/security.md describe them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Final

from raftlog.errors import ConfigError
from raftlog.metrics import Counter

RATE_FIELDS: Final = ("records_per_s", "bytes_per_s", "records_burst", "bytes_burst")
CAP_FIELDS: Final = ("streams", "waiting_reads", "connections")
MAX_TRACKED: Final = 10_000
"""Principals with a bucket or a cap at once; past it idle ones are forgotten (bounds memory
on a plaintext cluster, where every source address is a principal)."""
ADDRESS_LABEL: Final = "address"
"""The metrics label of every per-address principal: addresses are unbounded, so they are
never label values (the ``quota_refused`` log event names them, sampled)."""


@dataclass(frozen=True, slots=True)
class Quota:
    """What one principal may use; None is "no limit" for that dimension."""

    records_per_s: float | None = None
    bytes_per_s: float | None = None
    records_burst: float | None = None
    """Records the bucket holds when full; default: one second's worth (``records_per_s``)."""
    bytes_burst: float | None = None
    streams: int | None = None
    """Concurrent RequestEntries streams."""
    waiting_reads: int | None = None
    """Concurrent waiting reads: ZeroMQ ``TR`` reads with a wait, REST long polls."""
    connections: int | None = None
    """Concurrent ZeroMQ connections of a CURVE key (or of a plaintext source address) that
    have sent a request; HTTP connections are capped per address by the listener."""

    @property
    def limits_publish(self) -> bool:
        """True if publishing is rate-limited at all."""
        return self.records_per_s is not None or self.bytes_per_s is not None

    @property
    def empty(self) -> bool:
        """True if this quota limits nothing."""
        return all(getattr(self, f.name) is None for f in fields(self))

    def over(self, override: Quota) -> Quota:
        """This quota with every field ``override`` sets replaced (role default, then the
        client's own)."""
        changes = {
            f.name: v for f in fields(override) if (v := getattr(override, f.name)) is not None
        }
        return replace(self, **changes)

    @classmethod
    def parse(cls, raw: object, what: str, *, complete: bool = True) -> Quota:
        """A quota table: positive numbers for rates and bursts, positive integers for
        caps; a clear ConfigError names the field otherwise. ``complete=False`` for a
        client's override, whose burst may go with its role's rate (:meth:`checked` then
        checks the merged quota)."""
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{what} must be a table")
        unknown = set(raw) - set(RATE_FIELDS) - set(CAP_FIELDS)
        if unknown:
            raise ConfigError(f"{what}: unknown quota field(s) {sorted(unknown)}; known: "
                              f"{', '.join(RATE_FIELDS + CAP_FIELDS)}")
        values: dict[str, Any] = {}
        for name, value in raw.items():
            if name in CAP_FIELDS:
                if type(value) is not int or value < 1:
                    raise ConfigError(f"{what}: {name} must be a positive integer, got {value!r}")
            elif (
                type(value) not in (int, float) or not math.isfinite(value) or value <= 0
            ):
                raise ConfigError(f"{what}: {name} must be a positive number, got {value!r}")
            values[name] = value
        quota = cls(**values)
        return quota.checked(what) if complete else quota

    def checked(self, what: str) -> Quota:
        """This quota, if every burst has its rate; else a ConfigError."""
        for burst, rate in (("records_burst", "records_per_s"), ("bytes_burst", "bytes_per_s")):
            if getattr(self, burst) is not None and getattr(self, rate) is None:
                raise ConfigError(f"{what}: {burst} needs {rate}")
        return self


def parse_role_quotas(raw: object, what: str, roles: tuple[str, ...]) -> dict[str, Quota]:
    """The allowlist's ``[quotas.ROLE]`` tables: role name -> its default quota."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{what}: quotas must be [quotas.ROLE] tables")
    unknown = set(raw) - set(roles)
    if unknown:
        raise ConfigError(f"{what}: quotas for unknown role(s) {sorted(unknown)}; "
                          f"roles: {', '.join(roles)}")
    return {role: Quota.parse(table, f"{what}: [quotas.{role}]") for role, table in raw.items()}


def plaintext_quota(doc: Mapping[str, Any], source: str) -> Quota | None:
    """The cluster file's ``[quotas]`` table (per source address; used only on plaintext
    clusters, where there is no key to name a principal). None when absent or empty."""
    raw = doc.get("quotas")
    if raw is None:
        return None
    quota = Quota.parse(raw, f"{source}: [quotas]")
    return None if quota.empty else quota


class PublishBucket:
    """The two token buckets (records, bytes) of one principal; see the module docstring."""

    __slots__ = (
        "_b_burst",
        "_b_rate",
        "_b_tokens",
        "_r_burst",
        "_r_rate",
        "_r_tokens",
        "_stamp",
        "quota",
    )

    def __init__(self, quota: Quota, now: float) -> None:
        self.quota = quota
        self._r_rate = quota.records_per_s or 0.0
        self._r_burst = float(quota.records_burst or self._r_rate)
        self._b_rate = quota.bytes_per_s or 0.0
        self._b_burst = float(quota.bytes_burst or self._b_rate)
        self._r_tokens = self._r_burst
        self._b_tokens = self._b_burst
        self._stamp = now

    @property
    def full(self) -> bool:
        """Both buckets are full: forgetting this one changes nothing."""
        return self._r_tokens >= self._r_burst and self._b_tokens >= self._b_burst

    def take(self, records: int, nbytes: int, now: float) -> float:
        """Take ``records`` and ``nbytes``: 0.0 if admitted, else the seconds to wait
        before the same request would be (nothing is taken then)."""
        elapsed = now - self._stamp
        elapsed = max(elapsed, 0.0)
        self._stamp = now
        wait = 0.0
        r_rate = self._r_rate
        if r_rate:
            tokens = self._r_tokens + elapsed * r_rate
            tokens = min(tokens, self._r_burst)
            self._r_tokens = tokens
            need = records if records < self._r_burst else self._r_burst
            if tokens < need:
                wait = (need - tokens) / r_rate
        b_rate = self._b_rate
        if b_rate:
            tokens = self._b_tokens + elapsed * b_rate
            tokens = min(tokens, self._b_burst)
            self._b_tokens = tokens
            need = nbytes if nbytes < self._b_burst else self._b_burst
            if tokens < need:
                b_wait = (need - tokens) / b_rate
                wait = max(wait, b_wait)
        if wait:
            return wait
        if r_rate:
            self._r_tokens -= records
        if b_rate:
            self._b_tokens -= nbytes
        return 0.0


class QuotaBook:
    """The buckets and concurrency counts of every principal one listener has seen."""

    def __init__(self, refusals: Counter | None = None, *, per_address: bool = False,
                 max_tracked: int = MAX_TRACKED) -> None:
        """``per_address``: the principals are source addresses (a plaintext cluster), which
        are counted under the one label value ``address``."""
        self._per_address = per_address
        self._buckets: dict[str, PublishBucket] = {}
        self._held: dict[tuple[str, str], dict[Hashable, None]] = {}
        self._refusals = refusals
        self._max_tracked = max_tracked

    def publish_wait(self, who: str, quota: Quota, records: int, nbytes: int,
                     now: float) -> float:
        """0.0 if ``who`` may publish ``records`` records of ``nbytes`` bytes now, else the
        seconds until it may (the refusal is counted)."""
        bucket = self._buckets.get(who)
        if bucket is None or bucket.quota is not quota:  # new, or the allowlist was reloaded
            if bucket is not None and bucket.quota == quota:  # reloaded, unchanged: keep it
                bucket.quota = quota
            else:
                if bucket is None and len(self._buckets) >= self._max_tracked:
                    self._forget_full()
                bucket = self._buckets[who] = PublishBucket(quota, now)
        wait = bucket.take(records, nbytes, now)
        if wait:
            self.count(who, "publish_rate")
        return wait

    def admit(self, who: str, kind: str, key: Hashable, cap: int,
              live: Callable[[Any], bool] | None = None) -> bool:
        """May ``who`` hold one more ``kind`` (``streams``, ``waiting_reads``,
        ``connections``) under
        ``key``? A key already held is admitted again (a resent request). At the cap the
        keys ``live`` says have ended are dropped first, so a listener that does not report
        every end (a stream that finished or expired) still counts right."""
        held = self._held.get((who, kind))
        if held is None:
            if len(self._held) >= self._max_tracked:
                self._held = {k: v for k, v in self._held.items() if v}
            held = self._held[(who, kind)] = {}
        if key in held:
            return True
        if len(held) >= cap and live is not None:
            for ended in [k for k in held if not live(k)]:
                del held[ended]
        if len(held) >= cap:
            self.count(who, kind)
            return False
        held[key] = None
        return True

    def release(self, who: str, kind: str, key: Hashable) -> None:
        """``key`` ended (a REST long poll answered)."""
        held = self._held.get((who, kind))
        if held is not None:
            held.pop(key, None)

    def holding(self, who: str, kind: str) -> int:
        """How many ``kind`` ``who`` holds now (as counted; tests and the status page)."""
        return len(self._held.get((who, kind), ()))

    def count(self, who: str, kind: str) -> None:
        """Count one refusal in ``raftlog_quota_refusals{principal,kind}``."""
        if self._refusals is not None:
            label = ADDRESS_LABEL if self._per_address else who
            self._refusals.labels(principal=label, kind=kind).inc()

    def _forget_full(self) -> None:
        full = [who for who, bucket in self._buckets.items() if bucket.full]
        for who in full or list(self._buckets)[: len(self._buckets) // 2]:
            del self._buckets[who]

