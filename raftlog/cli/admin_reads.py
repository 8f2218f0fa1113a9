"""``raftlog-admin read|tail --consistency``: the read consistency options (issue #29).

One home for the options so the raw log reads (``cmd_read``) and the topic reads
(``admin_topics.read_topic``) take the same ones. A CLI run is its own client session and
has written nothing, so ``read_your_writes`` takes its minimum from ``--min-index`` (the
index a previous ``publish`` printed); docs/client.md, "Read consistency".
"""

from __future__ import annotations

import argparse
from typing import Any

from raftlog.rpc.reads import Consistency


def add_consistency_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--consistency``, ``--min-index`` and ``--from-peer`` to a read command."""
    parser.add_argument(
        "--consistency", default="any", choices=[level.value for level in Consistency],
        help="any (default: whatever the peer applied), read_your_writes (at least "
        "--min-index), linearizable (every write acknowledged before the read)",
    )
    parser.add_argument(
        "--min-index", type=int, metavar="INDEX",
        help="serve only once the peer applied this log index (e.g. a publish's index)",
    )
    parser.add_argument(
        "--from-peer", metavar="URL",
        help="read from this peer (a follower too) instead of the leader",
    )


def read_options(args: argparse.Namespace, *, raw: bool) -> dict[str, Any]:
    """The keyword arguments of ``RaftClient.request_entries`` (``raw``) or
    ``TopicClient.read`` for the options given."""
    min_index = getattr(args, "min_index", None)
    if min_index is not None and min_index < 0:
        raise ValueError("--min-index must not be negative")
    options: dict[str, Any] = {
        "consistency": getattr(args, "consistency", "any"),
        "min_index": min_index,
    }
    peer = getattr(args, "from_peer", None)
    options["from_peer" if raw else "url"] = peer
    return options
