"""The group calls of :class:`~raftlog.topics.client.TopicClient` (issue #27), kept here so the
topic client stays one screenful per concern. Changes are group commands sent with ``TP``
(``raftlog.topics.groups.entry``): replicated, applied by every peer, retried with the same
request id so each is applied at most once. Reads are ``GD``/``GL``/``GQ``
(``raftlog.topics.groups.wire``).

Stream groups: ``create_group(mode="stream")``, ``commit_group_position``,
``group_positions``. Queue groups: ``lease`` hands a member records (replicated, so every
peer agrees who holds what), ``ack`` / ``nack`` end the leases; ``raftlog.topics.groups.
consumer.Consumer`` wraps them in an async iterator.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from raftlog.errors import TopicError
from raftlog.topics.groups import wire
from raftlog.topics.groups.entry import GroupCommand, GroupOp, encode_group_command
from raftlog.topics.groups.model import GroupInfo, GroupPosition
from raftlog.topics.records import RecordId
from raftlog.topics.transport import TopicTransport

NOT_APPLIED_RETRY: float = 0.005
"""Pause before asking again when the peer has not applied a lease yet (rare: only after
a leader change between the lease and the question)."""




def group_data(op: GroupOp, group: str, args: dict[str, Any] | None = None) -> bytes:
    """Entry data of a group command (validated; the leader stamps the time)."""
    return encode_group_command(GroupCommand(op, group, dict(args or {})))


def _ids(records: Iterable[tuple[str, RecordId]]) -> list[list[Any]]:
    return [[topic, rid.index, rid.position] for topic, rid in records]


class GroupCalls:
    """Mixed into ``TopicClient``: consumer groups (module docstring)."""

    async def create_group(
        self: TopicTransport,
        /,
        name: str,
        *,
        mode: Literal["stream", "queue"],
        topics: Sequence[str] = (),
        pattern: str | None = None,
        exist_ok: bool = False,
        timeout: float | None = None,
        **options: Any,
    ) -> GroupInfo:
        """Create group ``name`` reading ``topics`` and/or the topics matching ``pattern``
        (a glob: ``orders.*``; topics created later that match are included). Queue options:
        ``ack_wait_ms``, ``max_deliveries``, ``max_in_flight``, ``dead_letter`` (a topic).
        With ``exist_ok`` an existing group is not an error (left as it is). Returns the
        group as the leader knows it (``GroupExists`` / ``InvalidGroup`` otherwise)."""
        body = {"mode": mode, "topics": list(topics), "pattern": pattern,
                "options": options, "exist_ok": exist_ok}
        try:
            await self.propose(group_data("create", name, body), timeout=timeout)
        except TopicError as exc:
            if not (exist_ok and exc.name == "GroupExists"):
                raise
        return wire.decode_info(
            await self.request(None, wire.TYPE_GROUP_DESCRIBE, [name.encode()], timeout=timeout)
        )

    async def commit_group_position(
        self: TopicTransport,
        group: str,
        topic: str,
        next_record: RecordId,
        *,
        metadata: str = "",
        member: str | None = None,
        timeout: float | None = None,
    ) -> int:
        """Commit stream group ``group``'s position on ``topic``: ``next_record`` is the id
        of the next record to deliver. Returns the commit's log index."""
        body = {"topic": topic, "next": [next_record.index, next_record.position],
                "metadata": metadata, "member": member}
        return await self.propose(group_data("commit", group, body), timeout=timeout)

    async def describe_group(
        self: TopicTransport, name: str, *, url: str | None = None, timeout: float | None = None
    ) -> GroupInfo:
        """Group ``name`` as peer ``url`` (default: the leader) has applied it."""
        frames = await self.request(url, wire.TYPE_GROUP_DESCRIBE, [name.encode()],
                                    timeout=timeout)
        return wire.decode_info(frames)

    async def group_positions(
        self: TopicTransport, group: str, *, url: str | None = None, timeout: float | None = None
    ) -> dict[str, GroupPosition]:
        """Stream group ``group``'s committed position per topic (absent: never committed)."""
        frames = await self.request(url, wire.TYPE_GROUP_DESCRIBE, [group.encode()],
                                    timeout=timeout)
        return wire.decode_info(frames).positions

    async def claim_topic(
        self: TopicTransport, group: str, topic: str, member: str, *, release: bool = False,
        timeout: float | None = None,
    ) -> int:
        """Stream groups: hold ``topic`` for ``member`` for the group's ``ack_wait_ms`` (claim
        again to renew), or give it up (``release``); ``TopicClaimed`` while another member
        holds it (``raftlog.topics.groups.claims``). Returns the command's log index."""
        body = {"topic": topic, "member": member}
        op: GroupOp = "release" if release else "claim"
        return await self.propose(group_data(op, group, body), timeout=timeout)

    async def delete_group(self: TopicTransport, name: str, *, timeout: float | None = None) -> int:
        """Delete group ``name`` and all its state; the delete's log index."""
        return await self.propose(group_data("delete", name), timeout=timeout)

    async def list_groups(
        self: TopicTransport, *, url: str | None = None, timeout: float | None = None
    ) -> tuple[str, ...]:
        """Every group's name, sorted."""
        frames = await self.request(url, wire.TYPE_GROUP_LIST, [], timeout=timeout)
        return wire.decode_list_response(frames)

    async def reset_group(
        self: TopicTransport,
        name: str,
        *,
        topic: str | None = None,
        to: Literal["earliest", "latest"] | RecordId = "earliest",
        timeout: float | None = None,
    ) -> int:
        """Move group ``name`` (on ``topic``, or every topic it reads) to the first retained
        record, past the last one, or to a record id. A queue group also forgets its leases
        and pending redeliveries there. Returns the command's log index."""
        where: Any = [to.index, to.position] if isinstance(to, RecordId) else to
        body = {"topic": topic, "to": where}
        return await self.propose(group_data("reset", name, body), timeout=timeout)

    async def lease(
        self: TopicTransport,
        group: str,
        member: str,
        max_records: int,
        *,
        only_topics: Sequence[str] | None = None,
        fresh: bool = False,
        timeout: float | None = None,
    ) -> list[wire.LeasedRecord]:
        """Lease up to ``max_records`` more records of queue group ``group`` to ``member``
        (within its in-flight limit); returns every record leased to it now, the new ones
        included, with their delivery counts. Empty: nothing to deliver (the leader refuses
        a lease that would hand out nothing, so polling writes nothing to the log).
        ``only_topics`` (names or ``prefix*``) limits the new leases to those topics;
        ``fresh`` to records never delivered (no redeliveries). The records come in
        answers of at most 4 MiB each (:meth:`leased`); this gathers them all."""
        index = await GroupCalls.lease_more(self, group, member, max_records,
                                            only_topics=only_topics, fresh=fresh, timeout=timeout)
        out: list[wire.LeasedRecord] = []
        after: tuple[str, RecordId] | None = None
        while True:
            page = await GroupCalls.leased(self, group, member, after=after,
                                           min_applied=index, timeout=timeout)
            out += page.records
            if not (page.more and page.records):
                return out
            after = (page.records[-1].topic, page.records[-1].id)

    async def lease_more(
        self: TopicTransport,
        group: str,
        member: str,
        max_records: int,
        *,
        only_topics: Sequence[str] | None = None,
        fresh: bool = False,
        timeout: float | None = None,
    ) -> int:
        """Lease up to ``max_records`` more records to ``member`` (as :meth:`lease`) without
        reading them; the lease command's log index (0: nothing new to lease), which
        :meth:`leased` waits for."""
        body: dict[str, Any] = {"member": member, "max": max_records}
        if only_topics is not None:
            body["read"] = list(only_topics)
        if fresh:
            body["fresh"] = True
        try:
            return await self.propose(group_data("lease", group, body), timeout=timeout)
        except TopicError as exc:
            if exc.name != "NoRecords":
                raise
            return 0  # nothing new: what the member holds already, if anything

    async def leased(
        self: TopicTransport,
        group: str,
        member: str,
        *,
        after: tuple[str, RecordId] | None = None,
        topic: str | None = None,
        min_applied: int = 0,
        timeout: float | None = None,
    ) -> wire.LeasedPage:
        """One answer of the records leased to ``member`` now (of ``topic`` only, if
        given), in id order after ``after``: at most 4 MiB of records (a larger one alone),
        ``more`` when further leases follow. Asked of a peer that applied ``min_applied``
        (a lease's index)."""
        req = wire.LeasedRequest(group, member, min_applied, after=after, topic=topic)
        while True:
            try:
                frames = await self.request(
                    None, wire.TYPE_GROUP_LEASED, wire.encode_leased_request(req), timeout=timeout
                )
                return wire.decode_leased_response(frames)
            except TopicError as exc:
                if exc.name != "NotApplied":
                    raise
                await asyncio.sleep(NOT_APPLIED_RETRY)

    async def ack(
        self: TopicTransport,
        group: str,
        member: str,
        records: Iterable[tuple[str, RecordId]],
        *,
        timeout: float | None = None,
    ) -> int:
        """Acknowledge ``(topic, id)`` records leased to ``member``: done, never redelivered."""
        body = {"member": member, "ids": _ids(records)}
        return await self.propose(group_data("ack", group, body), timeout=timeout)

    async def nack(
        self: TopicTransport,
        group: str,
        member: str,
        records: Iterable[tuple[str, RecordId]],
        *,
        reason: str = "",
        timeout: float | None = None,
    ) -> int:
        """Give leased records back for redelivery now (or to the dead-letter topic after
        ``max_deliveries``); ``reason`` travels to its headers."""
        body = {"member": member, "ids": _ids(records), "reason": reason}
        return await self.propose(group_data("nack", group, body), timeout=timeout)
