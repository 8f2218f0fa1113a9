"""HTTP errors (the REST API's and the monitoring endpoints'): one exception type carrying
the HTTP status, and the mapping from the cluster's typed errors onto status codes.

Why one place: every handler raises; the middleware (``raftlog.rest.app``) turns the
exception into the same JSON body ``{"error": CODE, "message": TEXT, ...}``, so a client
branches on a stable code (the cluster's ``TopicError.name`` where there is one) and every
endpoint answers the same failure with the same status.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from raftlog.errors import (
    AccessDeniedError,
    ClusterUnavailableError,
    EntryTooLargeError,
    ExpectationFailedError,
    RecordsExpiredError,
    RequestExpiredError,
    TopicError,
)


class RestError(Exception):
    """An answer other than success: status, stable code, one-line message, extra fields."""

    def __init__(
        self, status: int, code: str, message: str, extra: Mapping[str, object] | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.extra = dict(extra or {})
        self.headers: dict[str, str] = {}
        """Extra response headers (``Retry-After`` of a 429)."""

    def body(self) -> dict[str, object]:
        """The JSON error body."""
        return {"error": self.code, "message": self.message, **self.extra}


def busy(message: str) -> RestError:
    """503 ``Busy`` with ``Retry-After: 1``: a bounded memory of the listener is full for now
    (``raftlog.rest.answer_memory``, ``raftlog.rest.body_memory``); retrying shortly is
    right, nothing was done."""
    error = RestError(503, "Busy", message)
    error.headers["Retry-After"] = "1"
    return error


TOPIC_STATUS: Final[Mapping[str, int]] = {
    "UnknownTopic": 404,
    "TopicExists": 409,
    "RecordsExpired": 410,
    "UnknownTransaction": 404,
    "TransactionExpired": 409,
    "TransactionAborted": 409,
    "TransactionCommitted": 409,
    "TransactionExists": 409,
    "TransactionNotOwned": 403,
    "ExpectationFailed": 409,
    "KeyNotFound": 404,
    "UnknownGroup": 404,
    "GroupExists": 409,
    "TooManyRecords": 413,
}
"""TopicError names with a status of their own; every other TopicError (BadRequest,
InvalidProperty, InvalidTopicName, BadRecord, RecordTooLarge, ...) is the caller's
mistake: 400."""


def from_cluster(exc: Exception) -> RestError:
    """The REST answer for an error the cluster client raised."""
    if isinstance(exc, RecordsExpiredError):
        index, position = exc.first_available
        return RestError(410, exc.name, exc.message, {"firstAvailable": f"{index}-{position}"})
    if isinstance(exc, ExpectationFailedError):  # where the topic (or key) is now
        last = exc.current_last
        extra = {"lastId": None if last is None else f"{last[0]}-{last[1]}"}
        return RestError(409, exc.name, exc.message, extra)
    if isinstance(exc, TopicError):
        return RestError(TOPIC_STATUS.get(exc.name, 400), exc.name, exc.message)
    if isinstance(exc, EntryTooLargeError):
        return RestError(413, "EntryTooLarge", str(exc))
    if isinstance(exc, AccessDeniedError):
        # the cluster refused this peer's gateway (a misconfigured allowlist), not the caller
        return RestError(502, "GatewayRefused", str(exc))
    if isinstance(exc, RequestExpiredError):
        # only a caller's own Raftlog-Request-Id can be too old (the gateway's are fresh)
        return RestError(400, "RequestIdExpired", str(exc))
    if isinstance(exc, ClusterUnavailableError):
        return RestError(503, "Unavailable", str(exc))
    raise exc
