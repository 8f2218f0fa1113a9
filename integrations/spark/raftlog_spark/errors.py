"""Errors of the raftlog Spark source: raised at planning time (``load()``, query planning) for
bad options and an unreachable cluster, and inside tasks for data lost to compaction."""

from __future__ import annotations

import re
import socket
from collections.abc import Sequence
from typing import Final
from urllib.parse import urlsplit

from raftlog.errors import AuthenticationError


class RaftlogSourceError(ValueError):
    """A bad option, an unreachable cluster or a range that cannot be read. The message says
    which option or peer, and what to do."""


class RaftlogDataLossError(RaftlogSourceError):
    """Entries a query needs were compacted into a snapshot (``failOnDataLoss=false`` skips
    them instead)."""


ACCEPTS: Final = "accepts connections"
REFUSED: Final = "refused the connection"
TIMED_OUT: Final = "connection timed out"
UNKNOWN_HOST: Final = "unknown host"
_STATES: Final = {
    REFUSED: "refused the connection (is the peer running at this address?)",
    TIMED_OUT: "the TCP connection timed out (host down or unreachable)",
    UNKNOWN_HOST: "unknown host (the name does not resolve)",
}


def probe(url: str, timeout: float = 0.5) -> str | None:
    """What a TCP connection to ``url`` does now: :data:`ACCEPTS`, :data:`REFUSED`,
    :data:`TIMED_OUT`, :data:`UNKNOWN_HOST` (the name does not resolve) or the OS error's
    text; None for non-TCP URLs. Why: the client's own report cannot tell a host name that
    does not resolve from a refused port (ØMQ retries both silently)."""
    parts = urlsplit(url)
    if parts.scheme != "tcp" or parts.hostname is None or parts.port is None:
        return None
    host = "127.0.0.1" if parts.hostname in ("*", "0.0.0.0") else parts.hostname
    try:
        with socket.create_connection((host, parts.port), timeout=timeout):
            return ACCEPTS
    except socket.gaierror:
        return UNKNOWN_HOST
    except ConnectionRefusedError:
        return REFUSED
    except TimeoutError:
        return TIMED_OUT
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def _elapsed(cause: BaseException, timeout: float) -> str:
    """How long the failed call waited, from the client's report ("after 1.4s"), else the
    timeout: a cluster that refuses every connection fails fast, not after ``timeout``."""
    found = re.search(r"after (\d+(?:\.\d+)?)s", str(cause))
    return f"{found.group(1)}s" if found else f"{timeout:g}s"


def diagnose(
    peers: tuple[str, ...],
    ident: str,
    timeout: float,
    cause: BaseException,
    *,
    answered_before: bool = False,
    waited: float | None = None,
) -> str:
    """Why no peer answered, in one line naming the peers of each case: a CURVE cluster
    that refused this client's keys (or its lack of them), unknown hosts, peers that refuse
    connections or time out, and reachable ones that do not answer -- a wrong ident, unless
    the cluster ``answered_before`` with this ident (a task: planning talked to it), when
    they stopped answering (frozen, overloaded, partitioned). ``waited``: how long the caller
    went without an answer (default: what the client's report says)."""
    if isinstance(cause, AuthenticationError):  # the peers answered: no ident or URL hint
        return (
            f"raftlog source: {cause}; a secure cluster needs the keyFile and serverKeyFile "
            "options, with a key the peers' allowlist names"
        )
    by_state: dict[str, list[str]] = {}
    for url in peers:
        by_state.setdefault(probe(url) or "did not answer", []).append(url)
    parts: list[str] = []
    for state, urls in by_state.items():
        named = ", ".join(urls)
        if state == ACCEPTS and answered_before:
            parts.append(f"{named} accept(s) connections but stopped answering")
        elif state == ACCEPTS:
            parts.append(
                f"{named} accept(s) connections but no raftlog peer answered: check the "
                f"ident {ident!r} (peers silently ignore requests for another cluster ident) "
                "and that these are raftlog peer (ROUTER) URLs -- or the peers are frozen or "
                "overloaded"
            )
        elif len(by_state) == 1 and len(peers) > 1:
            parts.append(f"every peer: {_STATES.get(state, state)} ({named})")
        else:
            parts.append(f"{named}: {_STATES.get(state, state)}")
    took = _elapsed(cause, timeout) if waited is None else f"{waited:.1f}s"
    return f"raftlog source: the cluster did not answer ({took}): {'; '.join(parts)}"


def stalled_range(
    next_index: int, hi: int, timeout: float, peers: Sequence[str], cause: BaseException | None
) -> RaftlogSourceError:
    """A task's range that stopped for ``timeout`` while the cluster still answered: the
    leader serves no further entries, or its answers failed (``cause``)."""
    return RaftlogSourceError(
        f"raftlog source: no progress reading entries {next_index}..{hi} for "
        f"{timeout:g}s (peers {', '.join(peers)}): "
        f"{cause or 'the leader serves no further entries'}"
    )


def data_lost(next_index: int, last_lost: int, first_index: int, last: int) -> RaftlogDataLossError:
    """Entries ``next_index..last_lost`` were compacted away; the log now holds
    ``first_index..last`` (none when ``first_index > last``). Says what is left and how to
    skip the loss."""
    available = (
        f"available: {first_index}..{last}"
        if first_index <= last
        else f"no entry is available now; the next one will be {last + 1}"
    )
    return RaftlogDataLossError(
        f"raftlog source: entries {next_index}..{last_lost} are no longer in the log "
        f"(compacted into a snapshot; {available}); "
        "set failOnDataLoss=false to skip them"
    )
