"""What each peer did during a call, and the ``ClusterUnavailableError`` that says why.

A call that runs out of time should tell the operator what to fix, not only that it failed:

* every peer refused the connection (nothing listens at those addresses: wrong port, the
  cluster is down) -- known from the socket monitor, see :class:`~raftlog.client.dealer.
  ConnectionState`;
* connections were made but no peer answered anything: peers silently drop requests whose
  cluster ident is not theirs (the protocol has no error answer for it), so the ident is the
  first suspect;
* peers answered but none was a leader, or the leader did not finish: the per-peer tally.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping, Sequence
from typing import Final

from raftlog.client.dealer import AUTH_REQUIRED, ConnectionState
from raftlog.client.logs import client_log
from raftlog.errors import AuthenticationError, ClusterUnavailableError

ATTEMPT_LOG_SIZE: Final = 512
"""Outcomes remembered across calls (the report covers the failing call's share only)."""

SILENT: Final = frozenset({"unreachable", "no response", "refused"})
"""Outcomes that mean "the peer said nothing" (anything else is an answer)."""

NO_ANSWER: Final = "no peer answered: is the cluster ident right?"
ALL_REFUSED: Final = "every peer refused the connection: is the cluster running at these URLs?"
ONE_REFUSED: Final = "the peer refused the connection: is it running at this URL?"
NO_CONNECTION: Final = "no connection to any peer could be made"
AUTH_FAILED: Final = "authentication failed"


class AttemptLog:
    """A bounded record of ``(time, url, outcome)`` for the error report."""

    def __init__(self) -> None:
        self._attempts: deque[tuple[float, str, str]] = deque(maxlen=ATTEMPT_LOG_SIZE)

    def note(self, now: float, url: str, what: str) -> None:
        """Remember what the peer at ``url`` did (and log it at debug level)."""
        self._attempts.append((now, url, what))
        client_log().debug("client_attempt", url=url, outcome=what)

    def since(self, started: float) -> list[tuple[str, str]]:
        """``(url, outcome)`` of every attempt at or after ``started``."""
        return [(url, did) for t, url, did in self._attempts if t >= started]

    def unavailable(
        self,
        *,
        started: float,
        now: float,
        what: str,
        urls: Sequence[str],
        states: Mapping[str, ConnectionState],
    ) -> ClusterUnavailableError:
        """The error for a call that started at ``started`` and could not finish."""
        attempts = self.since(started)
        counts = Counter(attempts)
        tried = "; ".join(f"{url}: {did} x{n}" for (url, did), n in counts.items())
        detail = f"{what} after {now - started:.1f}s (peers {', '.join(urls)}); "
        detail += f"tried: {tried or 'nothing (already known)'}"
        why = diagnose([did for _, did in attempts], [states.get(u) for u in urls])
        if why == ALL_REFUSED and len(urls) == 1:
            why = ONE_REFUSED
        authentication = why is not None and why.startswith((AUTH_FAILED, AUTH_REQUIRED))
        error = AuthenticationError if authentication else ClusterUnavailableError
        return error(f"{why} ({detail})" if why else detail)


def diagnose(outcomes: Sequence[str], states: Sequence[ConnectionState | None]) -> str | None:
    """The likely cause when no peer answered at all; None when some peer did answer."""
    if any(did not in SILENT for did in outcomes):
        return None
    known = [s for s in states if s is not None]
    if known and len(known) == len(states) and all(s.refused_since is not None for s in known):
        failures = sorted({s.auth_error for s in known if s.auth_error is not None})
        if failures == [AUTH_REQUIRED]:
            return AUTH_REQUIRED
        if failures:
            return f"{AUTH_FAILED} ({'; '.join(failures)})"
        return ALL_REFUSED  # even if they answered before: they are down now
    if any(s.connected or s.ever_connected for s in known):
        return NO_ANSWER
    return NO_CONNECTION
