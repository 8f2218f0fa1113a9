"""``raftlog-admin groups create|list|describe|delete|reset`` and ``raftlog-admin consume``:
consumer groups from the shell (issue #27).

``consume`` prints one record value per line (``--json`` / ``--format`` as for ``read``),
stopping after ``--count`` records or after ``--wait-ms`` with nothing new. On a queue
group it leases records to this process as member ``--member`` (default: host and pid) and
acks each batch once printed, unless ``--no-ack`` -- then the leases run out after the
group's ``ack_wait_ms`` and the records are redelivered. On a stream group it reads from
the group's committed position and commits past what it printed (``--no-ack``: no commit).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import time
from typing import Any

from raftlog.cli.admin_io import EXIT_OK, UsageError, say, subcommand_example
from raftlog.cli.admin_topics import _jsonable, record_line
from raftlog.cli.formats import check_format
from raftlog.client import RaftClient
from raftlog.topics.client import TopicClient
from raftlog.topics.groups.model import GroupInfo
from raftlog.topics.records import LoggedRecord, RecordId

LEASE_BATCH = 500
IDLE_POLL_S = (0.02, 0.25)
"""Pause between looks while nothing is available: from the first to the second, doubling."""


def _output(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``-o json`` after the action too (``groups describe workers -o json``); SUPPRESS
    leaves the global option's value alone when it is not given here."""
    parser.add_argument("--output", "-o", choices=("table", "json"), default=argparse.SUPPRESS,
                        help="table (default) or json")
    return parser


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``groups`` with its actions, and ``consume``."""
    groups = subcommand_example(
        sub, "groups", "create, list, describe, delete or reset consumer groups", "groups list"
    )
    gsub = groups.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = subcommand_example(
        gsub, "create", "create a consumer group",
        "groups create workers --topic jobs --mode queue --dead-letter jobs.dlq",
    )
    _output(create).add_argument("name")
    create.add_argument("--topic", action="append", default=[], help="a topic (repeatable)")
    create.add_argument("--pattern", help="topics by glob, e.g. 'orders.*' (later ones too)")
    create.add_argument("--mode", choices=("stream", "queue"), default="stream")
    create.add_argument("--ack-wait-ms", type=int, help="queue: lease time before redelivery")
    create.add_argument("--max-deliveries", type=int, help="queue: deliveries before dead letter")
    create.add_argument("--max-in-flight", type=int, help="queue: most leases per member")
    create.add_argument("--dead-letter", help="queue: the dead-letter topic (created if missing)")
    create.add_argument("--if-not-exists", action="store_true",
                        help="an existing group is not an error")
    _output(subcommand_example(gsub, "list", "every consumer group", "groups list"))
    for action, summary in (("describe", "a group's positions, leases and counters"),
                            ("delete", "delete a group and all its state")):
        example = f"groups {action} workers"
        _output(subcommand_example(gsub, action, summary, example)).add_argument("name")
    reset = subcommand_example(
        gsub, "reset", "move a group to the start, the end or a record id",
        "groups reset workers --to earliest",
    )
    _output(reset).add_argument("name")
    reset.add_argument("--topic", help="only this topic (default: every topic of the group)")
    reset.add_argument("--to", default="earliest", help="earliest, latest or INDEX:POSITION")
    consume = subcommand_example(
        sub, "consume", "consume records as a member of a consumer group",
        "consume --group workers --topic jobs --count 10",
    )
    _output(consume).add_argument("--group", required=True)
    consume.add_argument("--topic", help="stream groups: the topic (queue groups: a check)")
    consume.add_argument("--count", type=int, help="stop after this many records")
    consume.add_argument("--wait-ms", type=int, default=1000,
                         help="stop after this long with nothing new (default 1000)")
    consume.add_argument("--no-ack", action="store_true",
                         help="do not ack (queue: redelivered later) or commit (stream)")
    consume.add_argument("--member", help="member name (default: host-pid)")
    consume.add_argument("--json", action="store_true", help="one JSON object per record")
    consume.add_argument("--format", type=check_format, metavar="FMT",
                         help="kcat-style, as for read (default: the value)")


def group_json(info: GroupInfo) -> dict[str, Any]:
    """``groups describe -o json``: every field, plus ``pending`` (queue: leased now)."""
    body: dict[str, Any] = {"name": info.name, "mode": info.mode}
    for name in ("topics", "pattern", "created_index", "options", "stats", "members",
                 "applied"):
        body[name] = _jsonable(getattr(info, name))
    body["positions"] = {t: _jsonable(p) for t, p in info.positions.items()}
    body["queue"] = {t: _jsonable(q) for t, q in info.queue.items()}
    body["pending"] = info.pending
    body["redeliver"] = sum(q.redeliver for q in info.queue.values())
    return body


def _describe_lines(info: GroupInfo) -> list[str]:
    rows = [("group", info.name), ("mode", info.mode), ("topics", ", ".join(info.topics) or "-"),
            ("pattern", info.pattern or "-"), ("created at", f"index {info.created_index}")]
    if info.mode == "queue":
        o = info.options
        rows += [("ack wait", f"{o.ack_wait_ms} ms"), ("max deliveries", str(o.max_deliveries)),
                 ("max in flight", str(o.max_in_flight)), ("dead letter", o.dead_letter or "-"),
                 ("pending", str(info.pending))]
        for topic, q in info.queue.items():
            rows.append((f"  {topic}", f"next {q.cursor}, {q.pending} leased, "
                                       f"{q.redeliver} to redeliver"))
        for member, n in sorted(info.members.items()):
            rows.append((f"  member {member}", f"{n} leased"))
    for topic, p in info.positions.items():
        rows.append((f"position {topic}", f"{p.next_record} ({p.metadata or 'no metadata'})"))
    s = info.stats
    rows.append(("counters", f"delivered {s.delivered}, acked {s.acked}, redelivered "
                             f"{s.redelivered}, dead-lettered {s.dead_lettered}"))
    width = max(len(name) for name, _ in rows)
    return [f"{name.ljust(width)} {value}" for name, value in rows]


def _position(text: str) -> Any:
    if text in ("earliest", "latest"):
        return text
    index, _, position = text.partition(":")
    if not index.isdigit() or not (position or "0").isdigit():
        raise UsageError(f"--to: earliest, latest or INDEX:POSITION, not {text!r}")
    return RecordId(int(index), int(position or 0))


async def cmd_groups(args: argparse.Namespace, client: RaftClient) -> int:
    """``groups create|list|describe|delete|reset``."""
    as_json = getattr(args, "output", "table") == "json"
    async with TopicClient(client) as tc:
        if args.action == "create":
            options = {k: v for k, v in (("ack_wait_ms", args.ack_wait_ms),
                                         ("max_deliveries", args.max_deliveries),
                                         ("max_in_flight", args.max_in_flight),
                                         ("dead_letter", args.dead_letter)) if v is not None}
            if args.dead_letter is not None:
                await tc.create_topic(args.dead_letter, exist_ok=True)
            info = await tc.create_group(args.name, mode=args.mode, topics=args.topic,
                                         pattern=args.pattern, exist_ok=args.if_not_exists,
                                         **options)
            say(args, f"created {info.mode} group {info.name} at index {info.created_index}",
                **group_json(info))
        elif args.action == "list":
            names = await tc.list_groups()
            print(json.dumps({"groups": list(names)}, indent=2) if as_json else "\n".join(names))
        elif args.action == "describe":
            info = await tc.describe_group(args.name)
            print(json.dumps(group_json(info), indent=2) if as_json
                  else "\n".join(_describe_lines(info)))
        elif args.action == "delete":
            index = await tc.delete_group(args.name)
            say(args, f"deleted group {args.name} at index {index}", group=args.name,
                deleted=True, index=index)
        else:
            index = await tc.reset_group(args.name, topic=args.topic, to=_position(args.to))
            say(args, f"reset group {args.name} to {args.to} at index {index}",
                group=args.name, to=args.to, index=index)
    return EXIT_OK


def _line(args: argparse.Namespace, item: LoggedRecord) -> str:
    if args.json or args.format is not None:
        return record_line(item, args.json, args.format)
    return item.record.value.decode("utf-8", "backslashreplace")


async def cmd_consume(args: argparse.Namespace, client: RaftClient) -> int:
    """``consume --group G [--topic T] [--count N] [--wait-ms MS] [--no-ack]``."""
    if getattr(args, "output", "table") == "json":
        args.json = True
    async with TopicClient(client) as tc:
        info = await tc.describe_group(args.group)
        if args.topic is not None and args.topic not in info.topics and info.pattern is None:
            raise UsageError(f"group {args.group} does not read topic {args.topic}")
        if info.mode == "queue":
            return await _consume_queue(args, tc, args.member or _member())
        if args.topic is None:
            if len(info.topics) != 1:
                raise UsageError("--topic: this stream group reads several topics; name one")
            args.topic = info.topics[0]
        return await _consume_stream(args, tc, info)


def _member() -> str:
    return f"{socket.gethostname()[:100]}-{os.getpid()}"


async def _idle(args: argparse.Namespace, last_new: float, pause: float) -> float | None:
    """Sleep before the next look; None when ``--wait-ms`` passed with nothing new."""
    if (time.monotonic() - last_new) * 1000 >= args.wait_ms:
        return None
    await asyncio.sleep(pause)
    return min(pause * 2, IDLE_POLL_S[1])


async def _consume_queue(args: argparse.Namespace, tc: TopicClient, member: str) -> int:
    shown: set[tuple[str, RecordId]] = set()
    last_new, pause = time.monotonic(), IDLE_POLL_S[0]
    while args.count is None or len(shown) < args.count:
        want = LEASE_BATCH if args.count is None else min(LEASE_BATCH, args.count - len(shown))
        # --no-ack holds what it got: it must not take back its own leases as they run out
        leased = await tc.lease(args.group, member, want, fresh=args.no_ack and bool(shown))
        fresh = [x for x in leased if (x.topic, x.id) not in shown]
        if args.count is not None:
            fresh = fresh[: args.count - len(shown)]
        if not fresh:
            if (next_pause := await _idle(args, last_new, pause)) is None:
                break
            pause = next_pause
            continue
        last_new, pause = time.monotonic(), IDLE_POLL_S[0]
        for x in fresh:
            shown.add((x.topic, x.id))
            if x.item is not None:
                print(_line(args, x.item), flush=True)
        if not args.no_ack:
            await tc.ack(args.group, member, [(x.topic, x.id) for x in fresh])
    return EXIT_OK


async def _consume_stream(args: argparse.Namespace, tc: TopicClient, info: GroupInfo) -> int:
    position = info.positions.get(args.topic)
    start = None if position is None else position.next_record
    shown = 0
    last_new, pause = time.monotonic(), IDLE_POLL_S[0]
    while args.count is None or shown < args.count:
        limit = 1000 if args.count is None else min(1000, args.count - shown)
        if start is None:
            result = await tc.read(args.topic, limit=limit)
        else:
            result = await tc.read(args.topic, from_index=start.index,
                                   from_position=start.position, limit=limit)
        if not result.records:
            if (next_pause := await _idle(args, last_new, pause)) is None:
                break
            pause = next_pause
            continue
        last_new, pause = time.monotonic(), IDLE_POLL_S[0]
        for item in result.records:
            print(_line(args, item), flush=True)
        shown += len(result.records)
        last = result.records[-1].id
        start = RecordId(last.index, last.position + 1)
        if not args.no_ack:
            await tc.commit_group_position(args.group, args.topic, start, metadata="consume")
    return EXIT_OK
