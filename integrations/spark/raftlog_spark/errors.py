"""Errors of the raftlog Spark source: raised at planning time (``load()``, query planning) for
bad options and an unreachable cluster, and inside tasks for data lost to compaction."""

from __future__ import annotations


class RaftlogSourceError(ValueError):
    """A bad option, an unreachable cluster or a range that cannot be read. The message says
    which option or peer, and what to do."""


class RaftlogDataLossError(RaftlogSourceError):
    """Entries a query needs were compacted into a snapshot (``failOnDataLoss=false`` skips
    them instead)."""
