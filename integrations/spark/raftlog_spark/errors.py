"""Errors of the raftlog Spark source: raised at planning time (``load()``, query planning) for
bad options and an unreachable cluster, and inside tasks for data lost to compaction."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from raftlog.errors import AuthenticationError


class RaftlogSourceError(ValueError):
    """A bad option, an unreachable cluster or a range that cannot be read. The message says
    which option or peer, and what to do."""


class RaftlogDataLossError(RaftlogSourceError):
    """Entries a query needs were compacted into a snapshot (``failOnDataLoss=false`` skips
    them instead)."""


def _tcp_reachable(url: str, timeout: float = 0.5) -> bool | None:
    """Whether a TCP connection to ``url`` opens (None for non-TCP URLs)."""
    parts = urlsplit(url)
    if parts.scheme != "tcp" or parts.hostname is None or parts.port is None:
        return None
    host = "127.0.0.1" if parts.hostname in ("*", "0.0.0.0") else parts.hostname
    try:
        with socket.create_connection((host, parts.port), timeout=timeout):
            return True
    except OSError:
        return False


def diagnose(peers: tuple[str, ...], ident: str, timeout: float, cause: BaseException) -> str:
    """Why no peer answered: a CURVE cluster that refused this client's keys (or its lack of
    them), unreachable peers, or reachable ones that ignore this ident."""
    if isinstance(cause, AuthenticationError):  # the peers answered: no ident or URL hint
        return (
            f"raftlog source: {cause}; a secure cluster needs the keyFile and serverKeyFile "
            "options, with a key the peers' allowlist names"
        )
    reachable = [url for url in peers if _tcp_reachable(url)]
    unreachable = [url for url in peers if url not in reachable]
    if reachable:
        hint = (
            f"{', '.join(reachable)} accept(s) connections but no raftlog peer answered: "
            f"check the ident {ident!r} (peers silently ignore requests for another "
            "cluster ident) and that these are raftlog peer (ROUTER) URLs"
        )
        if unreachable:
            hint += f"; unreachable: {', '.join(unreachable)}"
    else:
        hint = f"no peer is reachable ({', '.join(peers)}): check the URLs and that peers run"
    return f"raftlog source: no leader answered within {timeout:g}s: {hint} ({cause})"
