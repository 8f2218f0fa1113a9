"""The blocking twins of the group calls, mixed into ``SyncTopicClient`` (issue #27): same
names, arguments and errors as :class:`raftlog.topics.groups.client.GroupCalls`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal, Protocol

from raftlog.topics.client import TopicClient
from raftlog.topics.groups.model import GroupInfo, GroupPosition
from raftlog.topics.groups.wire import LeasedRecord
from raftlog.topics.records import RecordId


class _Runner(Protocol):
    @property
    def _topics(self) -> TopicClient: ...

    def _run(self, coro: Any) -> Any: ...


class SyncGroupCalls:
    """Blocking group calls (see ``GroupCalls`` for each)."""

    def create_group(
        self: _Runner,
        name: str,
        *,
        mode: Literal["stream", "queue"],
        topics: Sequence[str] = (),
        pattern: str | None = None,
        exist_ok: bool = False,
        timeout: float | None = None,
        **options: Any,
    ) -> GroupInfo:
        """See ``GroupCalls.create_group``."""
        info: GroupInfo = self._run(self._topics.create_group(
            name, mode=mode, topics=topics, pattern=pattern, exist_ok=exist_ok,
            timeout=timeout, **options,
        ))
        return info

    def commit_group_position(
        self: _Runner,
        group: str,
        topic: str,
        next_record: RecordId,
        *,
        metadata: str = "",
        member: str | None = None,
        timeout: float | None = None,
    ) -> int:
        """See ``GroupCalls.commit_group_position``."""
        index: int = self._run(self._topics.commit_group_position(
            group, topic, next_record, metadata=metadata, member=member, timeout=timeout
        ))
        return index

    def group_positions(
        self: _Runner, group: str, *, url: str | None = None, timeout: float | None = None
    ) -> dict[str, GroupPosition]:
        """See ``GroupCalls.group_positions``."""
        out: dict[str, GroupPosition] = self._run(
            self._topics.group_positions(group, url=url, timeout=timeout)
        )
        return out

    def describe_group(
        self: _Runner, name: str, *, url: str | None = None, timeout: float | None = None
    ) -> GroupInfo:
        """See ``GroupCalls.describe_group``."""
        info: GroupInfo = self._run(self._topics.describe_group(name, url=url, timeout=timeout))
        return info

    def delete_group(self: _Runner, name: str, *, timeout: float | None = None) -> int:
        """See ``GroupCalls.delete_group``."""
        index: int = self._run(self._topics.delete_group(name, timeout=timeout))
        return index

    def list_groups(
        self: _Runner, *, url: str | None = None, timeout: float | None = None
    ) -> tuple[str, ...]:
        """See ``GroupCalls.list_groups``."""
        names: tuple[str, ...] = self._run(self._topics.list_groups(url=url, timeout=timeout))
        return names

    def reset_group(
        self: _Runner,
        name: str,
        *,
        topic: str | None = None,
        to: Literal["earliest", "latest"] | RecordId = "earliest",
        timeout: float | None = None,
    ) -> int:
        """See ``GroupCalls.reset_group``."""
        index: int = self._run(self._topics.reset_group(name, topic=topic, to=to, timeout=timeout))
        return index

    def lease(
        self: _Runner, group: str, member: str, max_records: int, *, timeout: float | None = None
    ) -> list[LeasedRecord]:
        """See ``GroupCalls.lease``."""
        out: list[LeasedRecord] = self._run(
            self._topics.lease(group, member, max_records, timeout=timeout)
        )
        return out

    def ack(
        self: _Runner,
        group: str,
        member: str,
        records: Iterable[tuple[str, RecordId]],
        *,
        timeout: float | None = None,
    ) -> int:
        """See ``GroupCalls.ack``."""
        index: int = self._run(self._topics.ack(group, member, list(records), timeout=timeout))
        return index

    def nack(
        self: _Runner,
        group: str,
        member: str,
        records: Iterable[tuple[str, RecordId]],
        *,
        reason: str = "",
        timeout: float | None = None,
    ) -> int:
        """See ``GroupCalls.nack``."""
        index: int = self._run(
            self._topics.nack(group, member, list(records), reason=reason, timeout=timeout)
        )
        return index
