"""A topic follower over its waiting-reads quota (issue #25) falls back to polling instead
of ending with the error."""

from __future__ import annotations

from typing import Any

import pytest

from raftlog.errors import QuotaExceededError
from raftlog.topics.client_stream import _Cursor, _Idle, _Transport


class _Refusing:
    leader_url = "tcp://127.0.0.1:1"

    async def read(self, *_args: Any, **_kwargs: Any) -> None:
        raise QuotaExceededError(1.0, "waiting_reads", "follower already has 1 waiting reads")

    fetch = read  # a waiting TF counts against the same quota (issue #27)


@pytest.mark.parametrize("push", [True, False])
async def test_a_waiting_read_over_quota_means_poll(push: bool) -> None:
    idle = _Idle()
    transport = _Transport(None, push=push)
    assert await idle.wait(_Refusing(), [_Cursor("orders")], transport) is False  # type: ignore[arg-type]
    assert idle.supported  # the peer does support waiting reads: try again next time
    assert transport.push is push
