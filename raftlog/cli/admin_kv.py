"""``raftlog-admin kv``: the key-value view of compacted topics, and ``publish``'s
conditional options (issue #29).

``kv put|get|del|keys|watch TOPIC ...`` are thin adapters over ``raftlog.topics.kv``; keys
and values are UTF-8 text on the command line (a value of ``-`` is read from stdin). A
refused conditional write exits 1 naming the current revision, like ``publish
--expect-last-id`` (``raftlog.cli.admin_topics.publish_to_topic``).
"""

from __future__ import annotations

import argparse
import json
import sys

from raftlog.cli.admin_io import EXIT_OK, EXIT_REFUSED, UsageError, say, subcommand_example
from raftlog.client import RaftClient
from raftlog.topics.client import TopicClient
from raftlog.topics.kv import KeyValueEvent
from raftlog.topics.records_kv import Expected, parse_record_id

EXPECT_HELP = (
    "publish only if the topic's last record id is this (INDEX:POSITION or INDEX; 'none': the "
    "topic must be empty); each further record expects the one before. A refusal exits 1 "
    "and names the current last id"
)


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``kv`` command, and the ``--expect-*`` options of ``publish`` (added before)."""
    publish = sub.choices["publish"]
    publish.add_argument("--expect-last-id", metavar="ID", help="with --topic: " + EXPECT_HELP)
    publish.add_argument(
        "--expect-key-last-id",
        metavar="ID",
        help="with --topic and --key (a compacted topic): only if the key's latest record is "
        "this id ('none': the key has no value)",
    )
    kv = sub.add_parser(
        "kv",
        help="get, put, delete, list and watch keys of a compacted topic",
        description="The key-value view of a compacted topic (topics create NAME --cleanup "
        "compact): a put is a keyed record, a delete a tombstone; a key's revision is the "
        "id of its latest record.",
        epilog="examples:\n  raftlog-admin kv put accounts alice 10\n"
        "  raftlog-admin kv get accounts alice\n  raftlog-admin kv keys accounts al\n"
        "  raftlog-admin kv watch accounts --from-revision 1\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ksub = kv.add_subparsers(dest="action", required=True, metavar="ACTION")
    put = subcommand_example(
        ksub,
        "put",
        "set a key ('-' as VALUE: read it from stdin)",
        "kv put accounts alice 10 --expect-revision none",
    )
    put.add_argument("topic")
    put.add_argument("key")
    put.add_argument("value")
    delete = subcommand_example(ksub, "del", "delete a key (a tombstone)", "kv del accounts alice")
    delete.add_argument("topic")
    delete.add_argument("key")
    for parser in (put, delete):
        parser.add_argument(
            "--expect-revision",
            metavar="ID",
            help="only if the key's revision is this ('none': only if absent); exit 1 if not",
        )
    get = subcommand_example(
        ksub, "get", "print a key's value (exit 1 when it has none)", "kv get accounts alice"
    )
    get.add_argument("topic")
    get.add_argument("key")
    keys = subcommand_example(
        ksub, "keys", "list the live keys with a prefix", "kv keys accounts al"
    )
    keys.add_argument("topic")
    keys.add_argument("prefix", nargs="?", default="")
    watch = subcommand_example(
        ksub,
        "watch",
        "print changes of keys with a prefix, live",
        "kv watch accounts --from-revision 1",
    )
    watch.add_argument("topic")
    watch.add_argument("prefix", nargs="?", default="")
    watch.add_argument(
        "--from-revision",
        type=int,
        metavar="INDEX",
        help="start at this log index (the live keys changed since; default: from now on)",
    )



def conditional(args: argparse.Namespace) -> bool:
    """Does this ``publish`` carry an ``--expect-*`` option?"""
    return args.expect_last_id is not None or args.expect_key_last_id is not None


def _expected(text: str | None) -> Expected:
    if text is None:
        return None
    try:
        return parse_record_id(text)
    except ValueError:
        raise UsageError(f"--expect-revision takes INDEX:POSITION or none, got {text!r}") from None


def _text(data: bytes) -> str:
    return data.decode("utf-8", "backslashreplace")


def event_line(event: KeyValueEvent, as_json: bool) -> str:
    """One watched change as text or JSON."""
    if as_json:
        return json.dumps(
            {
                "type": event.kind,
                "key": _text(event.key),
                "value": None if event.kind == "delete" else _text(event.value),
                "revision": str(event.revision),
            }
        )
    value = f"\t{_text(event.value)}" if event.kind == "put" else ""
    return f"{event.kind.upper()}\t{event.revision}\t{_text(event.key)}{value}"


async def cmd_kv(args: argparse.Namespace, client: RaftClient) -> int:
    """``kv put|get|del|keys|watch``."""
    as_json = getattr(args, "output", "table") == "json"
    key = getattr(args, "key", "").encode()
    async with TopicClient(client) as tc:
        kv = tc.kv
        if args.action in ("put", "del"):
            expect = _expected(args.expect_revision)
            if args.action == "put":
                value = sys.stdin.buffer.read() if args.value == "-" else args.value.encode()
                rid = await kv.put(args.topic, key, value, expect_revision=expect)
            else:
                rid = await kv.delete(args.topic, key, expect_revision=expect)
            done = "put" if args.action == "put" else "deleted"
            say(args, f"{done} {args.key} at revision {rid}", key=args.key, revision=str(rid))
        elif args.action == "get":
            item = await kv.get(args.topic, key)
            if item is None:
                print(
                    f"raftlog-admin: key {args.key!r} has no value in {args.topic}", file=sys.stderr
                )
                return EXIT_REFUSED
            if as_json:
                print(
                    json.dumps(
                        {
                            "key": args.key,
                            "value": _text(item.record.value),
                            "revision": str(item.id),
                        }
                    )
                )
            else:
                sys.stdout.buffer.write(item.record.value + b"\n")
        elif args.action == "keys":
            found = await kv.keys(args.topic, args.prefix.encode())
            if as_json:
                print(
                    json.dumps(
                        {"keys": [{"key": _text(k), "revision": str(r)} for k, r in found]},
                        indent=2,
                    )
                )
            for k, _ in [] if as_json else found:
                print(_text(k))
        else:
            async for event in kv.watch(args.topic, args.prefix.encode(), args.from_revision):
                print(event_line(event, as_json), flush=True)
    return EXIT_OK
