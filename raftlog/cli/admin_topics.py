"""``raftlog-admin`` commands for topics (issue #7)."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import sys
from typing import Any

from raftlog.cli import admin_kv
from raftlog.cli.admin_io import EXIT_OK, UsageError, say, subcommand_example
from raftlog.cli.admin_publish import PublishReport, publish_stream
from raftlog.cli.admin_reads import read_options
from raftlog.cli.formats import render
from raftlog.client import RaftClient
from raftlog.topics.client import TopicClient, make_record
from raftlog.topics.records import CLEANUP_POLICIES, LoggedRecord, RecordId
from raftlog.topics.records_kv import Expected, expectations, parse_record_id
from raftlog.topics.wire import TopicInfo

PUBLISH_IN_FLIGHT = 64
READ_PAGE = 1000



def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``topics`` command and its actions, each with its own help and example; then
    ``kv`` and publish's conditional options (``admin_kv``)."""
    admin_kv.add_parsers(sub)
    topics = subcommand_example(
        sub, "topics", "create, list, describe or delete topics", "topics list"
    )
    tsub = topics.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = subcommand_example(
        tsub, "create", "create a topic", "topics create orders --retention-ms 86400000"
    )
    create.add_argument("name")
    create.add_argument("--retention-ms", type=int, help="records expire this long after append")
    create.add_argument(
        "--max-bytes", type=int, help="size retention: keep the newest records up to this size"
    )
    create.add_argument("--max-record-bytes", type=int, help="largest record accepted")
    create.add_argument("--description", help="what the topic is for (shown by describe)")
    create.add_argument(
        "--cleanup", choices=CLEANUP_POLICIES, help="cleanup_policy: delete (default), "
        "compact (the latest record per key: a key-value topic) or compact,delete",
    )
    create.add_argument(
        "--tombstone-retention-ms", type=int, help="compacted: keep deletions this long (1 day)"
    )
    create.add_argument(
        "--if-not-exists", action="store_true", help="an existing topic is not an error"
    )
    subcommand_example(tsub, "list", "every topic", "topics list")
    describe = subcommand_example(
        tsub, "describe", "a topic's properties and extent", "topics describe orders"
    )
    describe.add_argument("name")
    delete = subcommand_example(
        tsub, "delete", "delete a topic (its records are no longer served)", "topics delete orders"
    )
    delete.add_argument("name")


def property_lines(properties: object) -> list[tuple[str, str]]:
    """``(name, shown value)`` of every topic property; an unset limit (None) does not
    apply, shown as ``unlimited`` rather than ``None``; an unset text as ``-``."""
    if not dataclasses.is_dataclass(properties):
        return []
    shown: list[tuple[str, str]] = []
    for item in dataclasses.fields(properties):
        value = getattr(properties, item.name)
        unset = "-" if item.metadata.get("kind") == "text" else "unlimited"
        shown.append((item.name, unset if value is None else str(value)))
    return shown


def topic_info_json(info: TopicInfo) -> dict[str, Any]:
    """``topics describe -o json``: every field of the answer (``TopicInfo``), record ids
    as ``{"index", "position"}``, properties as an object (unset limits are null)."""
    return {f.name: _jsonable(getattr(info, f.name)) for f in dataclasses.fields(info)}


def _jsonable(value: object) -> object:
    if isinstance(value, RecordId):
        return {"index": value.index, "position": value.position}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return value


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


def record_line(item: LoggedRecord, as_json: bool, fmt: str | None = None) -> str:
    """One topic record as a line of text, JSON, or ``fmt`` (``raftlog.cli.formats``)."""
    rec = item.record
    when = dt.datetime.fromtimestamp(item.append_time_ms / 1000, dt.UTC).isoformat()
    value = rec.value.decode("utf-8", "backslashreplace")
    if fmt is not None:
        text = {k: v.decode("utf-8", "backslashreplace") for k, v in rec.headers.items()}
        return render(fmt, {
            "i": str(item.id), "t": rec.topic, "v": value, "T": when, "S": str(len(rec.value)),
            "k": "" if rec.key is None else rec.key.decode("utf-8", "backslashreplace"),
            "h": ",".join(f"{k}={v}" for k, v in text.items()),
        })
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


async def cmd_topics(args: argparse.Namespace, client: RaftClient) -> int:
    """``topics create|list|describe|delete`` (and ``kv ...``: ``admin_kv``)."""
    if args.command == "kv":
        return await admin_kv.cmd_kv(args, client)
    async with TopicClient(client) as tc:
        if args.action == "create":
            index = await tc.create_topic(
                args.name,
                retention_ms=args.retention_ms,
                max_bytes=args.max_bytes,
                max_record_bytes=args.max_record_bytes,
                properties={
                    name: value
                    for name, value in (
                        ("description", args.description),
                        ("cleanup_policy", args.cleanup),
                        ("tombstone_retention_ms", args.tombstone_retention_ms),
                    )
                    if value is not None
                },
                exist_ok=args.if_not_exists,
            )
            if index is None:
                say(args, f"topic {args.name} exists already", topic=args.name, created=False)
            else:
                say(args, f"created topic {args.name} at index {index}", topic=args.name,
                    created=True, index=index)
        elif args.action == "list":
            names = await tc.list_topics()
            if getattr(args, "output", "table") == "json":
                print(json.dumps({"topics": list(names)}, indent=2))
            else:
                for name in names:
                    print(name)
        elif args.action == "describe":
            info = await tc.describe(args.name)
            if getattr(args, "output", "table") == "json":
                print(json.dumps(topic_info_json(info), indent=2))
                return EXIT_OK
            rows = [("topic", info.name), ("created at", f"index {info.created_index}")]
            rows += property_lines(info.properties)
            rows.append(("published", f"{info.published_bytes} bytes"))
            rows.append(("low water", "none" if info.low_water is None else str(info.low_water)))
            rows.append(("first record", "none" if info.first is None else str(info.first)))
            rows.append(("last record", "none" if info.last is None else str(info.last)))
            width = max(len(name) for name, _ in rows)
            for name, value in rows:
                print(f"{name.ljust(width)} {value}")
        else:
            index = await tc.delete_topic(args.name)
            say(args, f"deleted topic {args.name} at index {index}", topic=args.name,
                deleted=True, index=index)
    return EXIT_OK


async def publish_to_topic(
    args: argparse.Namespace, client: RaftClient, names: list[str], unit: str
) -> int:
    """``publish --topic``: each input record becomes one topic record, streamed."""
    key = None if args.key is None else args.key.encode()
    report: PublishReport[RecordId] = PublishReport()
    expected = _expected(args.expect_last_id, "--expect-last-id")
    key_expected = _expected(args.expect_key_last_id, "--expect-key-last-id")
    if key_expected is not None and key is None:
        raise UsageError("--expect-key-last-id needs --key")
    conditional = expected is not None or key_expected is not None
    async with TopicClient(client) as tc:

        async def publish(value: bytes) -> RecordId:
            nonlocal expected, key_expected
            record = make_record(args.topic, value, key=key)
            if not conditional:
                return (await tc.publish_batch([record]))[0]
            # each record expects its predecessor: the input lands as one unbroken run
            expect = expectations(args.topic, key, expected, key_expected)
            rid = (await tc.publish_batch([record], expect=expect))[0]
            expected = rid if expected is not None else None
            key_expected = rid if key_expected is not None else None
            return rid

        try:
            await publish_stream(
                names,
                publish,
                report,
                whole=args.whole,
                in_flight=1 if conditional else PUBLISH_IN_FLIGHT,
                show_progress=not args.no_progress,
            )
        except BaseException as error:
            if (line := report.failure_summary(unit, error)) is not None:
                print(f"raftlog-admin: {line}", file=sys.stderr)
            raise
    last = max(report.confirmed.values(), default=None)
    say(args, f"published {len(report.confirmed)} record(s) to {args.topic}; last id {last}",
        published=len(report.confirmed), topic=args.topic,
        last_id=None if last is None else str(last))
    return EXIT_OK


conditional = admin_kv.conditional  # for admin.py, which reaches admin_kv through here


def _expected(text: str | None, option: str) -> Expected:
    """An ``--expect-*`` option's id (``none``: no record), or None when not given."""
    if text is None:
        return None
    try:
        return parse_record_id(text)
    except ValueError:
        raise UsageError(f"{option} takes INDEX:POSITION, INDEX or none, got {text!r}") from None


async def read_topic(args: argparse.Namespace, client: RaftClient) -> int:
    """``read --topic``: a topic's records from an index or a time, or followed live."""
    async with TopicClient(client) as tc:
        from_time = None if args.from_time is None else parse_time(args.from_time)
        if args.follow:
            stream = tc.subscribe(
                [args.topic],
                from_index=args.start if from_time is None else None,
                from_time_ms=from_time,
            )
            async for item in stream:
                print(record_line(item, args.json, args.format), flush=True)
            return EXIT_OK
        shown = 0
        limit = args.count
        # no --from: the oldest retained record; --from below what retention removed: the
        # RecordsExpired error (one line, exit 1), never a silent later start
        index, position, inclusive = args.start, None, True
        while limit is None or shown < limit:
            page = READ_PAGE if limit is None else min(READ_PAGE, limit - shown)
            if from_time is not None:
                result = await tc.read(
                    args.topic, from_time_ms=from_time, limit=page, **read_options(args, raw=False)
                )
                from_time = None
            else:
                result = await tc.read(
                    args.topic,
                    from_index=index,
                    from_position=position,
                    inclusive=inclusive,
                    limit=page,
                    **read_options(args, raw=False),
                )
            for item in result.records:
                print(record_line(item, args.json, args.format))
            shown += len(result.records)
            if not result.more or not result.records:
                break
            index, position, inclusive = (
                result.records[-1].id.index,
                result.records[-1].id.position,
                False,
            )
    return EXIT_OK
