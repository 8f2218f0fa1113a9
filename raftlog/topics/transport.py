"""``TopicTransport``: the two primitives of :class:`~raftlog.topics.client.TopicClient` that
the faces built on it (consumer groups, the key-value view) use.

Why a Protocol of its own: those faces live in modules the topic client imports, so they
cannot import the client; one description of its primitives serves them all, instead of
each restating the signatures.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class TopicTransport(Protocol):
    """Sending a request to a peer and proposing a topic entry (``TopicClient``'s)."""

    async def request(
        self,
        url: str | None,
        msg_type: bytes,
        args: Sequence[bytes],
        *,
        timeout: float | None = None,
        patience: float = 0.0,
    ) -> list[bytes]:
        """One request, to ``url`` or the leader; the frames of the answer."""
        ...

    async def propose(
        self, data: bytes, *, request_id: bytes | None = None, timeout: float | None = None
    ) -> int:
        """Publish a topic entry; its index."""
        ...
