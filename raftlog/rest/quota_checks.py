"""The REST side of the quotas (issue #25): publish rate and long polls per principal.

Why here and not at the leader: a REST publish reaches the leader through this peer's
cluster client under the peer's own member key, which is never limited; the caller (a
token's client, or on a plaintext cluster the source address) is known only here. So each
peer's REST API keeps its own book (``raftlog.security.quotas``) on its listener's thread:
a client spread over several peers' HTTP ports gets each peer's allowance (documented in
docs/operations.md §11). Over quota -> 429 ``QuotaExceeded`` with ``Retry-After`` (whole
seconds, rounded up, as RFC 9110 wants) and ``retryAfterMs`` in the body; nothing is
forwarded, so nothing is appended.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator

from aiohttp import web

from raftlog.metrics import Counter
from raftlog.security.policy import Principal
from raftlog.security.quotas import Quota, QuotaBook
from raftlog.web.errors import RestError


class QuotaRefusedError(RestError):
    """429 with a ``Retry-After`` header (``raftlog.rest.app`` sends ``headers``)."""

    def __init__(self, retry_after: float, kind: str, message: str) -> None:
        retry_ms = max(1, math.ceil(retry_after * 1000))
        super().__init__(429, "QuotaExceeded", message,
                         {"kind": kind, "retryAfterMs": retry_ms})
        self.headers = {"Retry-After": str(max(1, math.ceil(retry_after)))}


class RestQuotas:
    """The quotas of one peer's REST API (module docstring)."""

    def __init__(self, plaintext: Quota | None, refusals: Counter | None, *,
                 secure: bool) -> None:
        self._plaintext = None if secure else plaintext
        self._secure = secure
        self._book = QuotaBook(refusals, per_address=not secure)

    def _of(self, request: web.Request, who: Principal | None) -> tuple[str, Quota] | None:
        if self._secure:
            if who is None or who.quota is None:
                return None
            return who.name, who.quota
        if self._plaintext is None:
            return None
        return request.remote or "-", self._plaintext

    def publish(self, request: web.Request, who: Principal | None, records: int,
                nbytes: int) -> None:
        """Charge a publish of ``records`` records, ``nbytes`` payload bytes; 429 if over."""
        found = self._of(request, who)
        if found is None or not found[1].limits_publish:
            return
        name, quota = found
        wait = self._book.publish_wait(name, quota, records, nbytes, time.monotonic())
        if wait:
            raise QuotaRefusedError(wait, "publish_rate", f"{name} is over its publish quota")

    def payloads(self, request: web.Request, who: Principal | None,
                 payloads: list[bytes]) -> None:
        """:meth:`publish` of these message payloads (one record each)."""
        if payloads:
            self.publish(request, who, len(payloads), sum(map(len, payloads)))

    @contextlib.contextmanager
    def long_poll(self, request: web.Request, who: Principal | None) -> Iterator[None]:
        """Hold one waiting-read slot for the duration of a long poll; 429 at the cap."""
        found = self._of(request, who)
        cap = None if found is None else found[1].waiting_reads
        if found is None or cap is None:
            yield
            return
        name = found[0]
        key = id(request)
        if not self._book.admit(name, "waiting_reads", key, cap):
            raise QuotaRefusedError(1.0, "waiting_reads",
                                f"{name} already has {cap} long polls waiting")
        try:
            yield
        finally:
            self._book.release(name, "waiting_reads", key)
