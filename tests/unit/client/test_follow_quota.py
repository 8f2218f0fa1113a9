"""A topic follower over its waiting-reads quota (issue #25) falls back to polling instead
of ending with the error."""

from __future__ import annotations

from typing import Any

from raftlog.errors import QuotaExceededError
from raftlog.topics.client_stream import _Cursor, _Idle


class _Refusing:
    leader_url = "tcp://127.0.0.1:1"

    async def read(self, *_args: Any, **_kwargs: Any) -> None:
        raise QuotaExceededError(1.0, "waiting_reads", "follower already has 1 waiting reads")


async def test_a_waiting_read_over_quota_means_poll() -> None:
    idle = _Idle()
    assert await idle.wait(_Refusing(), [_Cursor("orders")], None) is False  # type: ignore[arg-type]
    assert idle.supported  # the peer does support waiting reads: try again next time
