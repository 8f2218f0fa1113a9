"""``raftlog-admin`` commands for topics and compaction (issue #7)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys

import zmq

from raftlog import sockets
from raftlog.cli.admin_io import EXIT_OK, EXIT_UNAVAILABLE, UsageError, publish_all
from raftlog.client import RaftClient, SyncRaftClient
from raftlog.client.topics import TopicClient, make_record
from raftlog.records import LoggedRecord, RecordId
from raftlog.rpc.admin import CompactStatus, compact_request, decode_compact_response
from raftlog.rpc.codec import encode_request

NOTHING = (
    "nothing to compact (entries whose request ids are still remembered stay in the log so "
    "retries remain idempotent: docs/protocol.md §12.7, option request_id_ttl)"
)
PUBLISH_IN_FLIGHT = 64
READ_PAGE = 1000


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``topics`` and ``compact`` sub-commands to ``raftlog-admin``."""
    topics = sub.add_parser("topics", help="create, list, describe or delete topics")
    tsub = topics.add_subparsers(dest="action", required=True)
    create = tsub.add_parser("create", help="create a topic")
    create.add_argument("name")
    create.add_argument("--retention-ms", type=int, help="records expire this long after append")
    create.add_argument("--max-bytes", type=int, help="largest record accepted")
    tsub.add_parser("list", help="every topic")
    describe = tsub.add_parser("describe", help="a topic's properties and extent")
    describe.add_argument("name")
    delete = tsub.add_parser("delete", help="delete a topic (its records are no longer served)")
    delete.add_argument("name")
    compact = sub.add_parser("compact", help="snapshot and drop the log prefix on every peer now")
    compact.add_argument("--peer", action="append", help="only these peer URLs (repeatable)")


def parse_time(text: str) -> int:
    """Milliseconds since the epoch from ``1700000000000`` or an ISO 8601 time (UTC if no
    zone is given)."""
    if text.isdigit():
        return int(text)
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--from-time: not a time: {text!r} (ISO 8601 or ms)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def record_line(item: LoggedRecord, as_json: bool) -> str:
    """One topic record as a line of text (or JSON) for ``topics read``."""
    rec = item.record
    when = dt.datetime.fromtimestamp(item.append_time_ms / 1000, dt.UTC).isoformat()
    value = rec.value.decode("utf-8", "backslashreplace")
    if as_json:
        return json.dumps(
            {
                "id": str(item.id),
                "topic": rec.topic,
                "key": None if rec.key is None else rec.key.decode("utf-8", "backslashreplace"),
                "value": value,
                "headers": {
                    k: v.decode("utf-8", "backslashreplace") for k, v in rec.headers.items()
                },
                "append_time": when,
            }
        )
    return f"{item.id}\t{when}\t{rec.topic}\t{value}"


async def cmd_topics(args: argparse.Namespace, urls: list[str], ident: str) -> int:
    """``topics create/list/describe/delete``."""
    async with RaftClient(urls, ident, timeout=args.timeout) as client, TopicClient(client) as tc:
        if args.action == "create":
            index = await tc.create_topic(
                args.name, retention_ms=args.retention_ms, max_bytes=args.max_bytes
            )
            print(f"created topic {args.name} at index {index}")
        elif args.action == "list":
            for name in await tc.list_topics():
                print(name)
        elif args.action == "describe":
            info = await tc.describe(args.name)
            props = info.properties
            print(f"topic        {info.name}")
            print(f"created at   index {info.created_index}")
            print(f"retention_ms {props.retention_ms}")
            print(f"max_bytes    {props.max_bytes}")
            print(f"first record {info.first}")
            print(f"last record  {info.last}")
        else:
            index = await tc.delete_topic(args.name)
            print(f"deleted topic {args.name} at index {index}")
    return EXIT_OK


async def publish_to_topic(
    args: argparse.Namespace, urls: list[str], ident: str, records: list[bytes]
) -> int:
    """``publish --topic``: each input record as a topic record, published with bounded
    concurrency."""
    key = None if args.key is None else args.key.encode()
    async with RaftClient(urls, ident, timeout=args.timeout) as client, TopicClient(client) as tc:

        async def publish(value: bytes) -> RecordId:
            return (await tc.publish_batch([make_record(args.topic, value, key=key)]))[0]

        ids = await publish_all(
            records, publish, in_flight=PUBLISH_IN_FLIGHT, show_progress=args.progress
        )
    last = max(ids, default=None)
    print(f"published {len(ids)} record(s) to {args.topic}; last id {last}")
    return EXIT_OK


async def read_topic(args: argparse.Namespace, urls: list[str], ident: str) -> int:
    """``topics read``: records of one topic from an index or a time, optionally following live."""
    async with RaftClient(urls, ident, timeout=args.timeout) as client, TopicClient(client) as tc:
        from_time = None if args.from_time is None else parse_time(args.from_time)
        if args.follow:
            stream = tc.subscribe(
                [args.topic],
                from_index=args.start if from_time is None else None,
                from_time_ms=from_time,
            )
            async for item in stream:
                print(record_line(item, args.json), flush=True)
            return EXIT_OK
        shown = 0
        limit = args.count
        index, position, inclusive = (args.start or 1), None, True
        while limit is None or shown < limit:
            page = READ_PAGE if limit is None else min(READ_PAGE, limit - shown)
            if from_time is not None:
                result = await tc.read(args.topic, from_time_ms=from_time, limit=page)
                from_time = None
            else:
                result = await tc.read(
                    args.topic,
                    from_index=index,
                    from_position=position,
                    inclusive=inclusive,
                    limit=page,
                )
            for item in result.records:
                print(record_line(item, args.json))
            shown += len(result.records)
            if not result.more or not result.records:
                break
            index, position, inclusive = (
                result.records[-1].id.index,
                result.records[-1].id.position,
                False,
            )
    return EXIT_OK


def cmd_compact(args: argparse.Namespace, urls: list[str], ident: str) -> int:
    """``compact``: ask each peer (or the named ones) to compact its own log now; reports the new
    snapshot index or why nothing was compacted."""
    targets = args.peer
    if not targets:
        with SyncRaftClient(urls, ident, timeout=args.timeout) as client:
            targets = [p.url for p in client.request_config().peers]
    failed = 0
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    for url in targets:
        sock: zmq.Socket[bytes] = sockets.client_dealer(context, url, immediate=False)
        try:
            sock.send_multipart(encode_request(compact_request(), ident=ident.encode(), id=b"\x01"))
            if sock.poll(int(args.timeout * 1000)):
                answer = decode_compact_response(sock.recv_multipart()[1:])
                done = answer.status is CompactStatus.COMPACTED
                print(f"{url}\t" + (f"compacted to {answer.index}" if done else NOTHING))
            else:
                print(f"{url}\tno answer", file=sys.stderr)
                failed += 1
        finally:
            sock.close(linger=0)
    return EXIT_UNAVAILABLE if failed == len(targets) else EXIT_OK
