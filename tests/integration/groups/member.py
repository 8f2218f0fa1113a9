"""A queue-group member process for the consumer tests (issue #27).

``python -m integration.groups.member URLS IDENT GROUP MEMBER MODE OUT``:

* ``hold``: lease up to 1000 records once, write ``topic index position deliveries`` per
  record to OUT, then sleep (the test kills it with -9 while it holds the leases);
* ``work``: consume; nack records whose value starts with ``poison`` (reason ``poison``),
  write every other one to OUT and ack it; stop when the file OUT.stop exists.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from raftlog.topics.groups.consumer import SyncConsumer
from raftlog.topics.sync_client import SyncTopicClient


def main() -> None:
    urls, ident, group, member, mode, out = sys.argv[1:7]
    path = Path(out)
    with SyncTopicClient(urls.split(","), ident, timeout=30.0) as topics, \
            path.open("a") as sink:
        if mode == "hold":
            for x in topics.lease(group, member, 1000):
                sink.write(f"{x.topic} {x.id.index} {x.id.position} {x.deliveries}\n")
            sink.flush()
            time.sleep(3600)
            return
        stop = Path(out + ".stop")
        with SyncConsumer(topics, group, member=member, batch=5) as consumer:
            while not stop.exists():
                message = consumer.next_message(timeout=0.2)
                if message is None:
                    continue
                if message.value.startswith(b"poison"):
                    message.nack("poison")
                    continue
                m = message
                sink.write(f"{m.topic} {m.id.index} {m.id.position} {m.deliveries}\n")
                sink.flush()
                message.ack()


if __name__ == "__main__":
    main()
