"""Python's cyclic garbage collector in Spark's Python workers, kept off the read path.

Why: measured on issue #17's data set (1.1M records, ``local[2]``), the collector took
about a fifth of the Python workers' CPU time, none of it finding garbage worth the cost:

* PySpark's worker daemon runs a *full* ``gc.collect()`` after every task of a reused
  worker (``pyspark/daemon.py``). A worker holds pyspark, pandas, pyarrow and raftlog, so
  each of those collections walks several hundred thousand module objects: ~40 ms of CPU
  per task, ~25 ms per planning call, before the worker takes its next task.
  :func:`freeze_worker_heap` moves what the worker holds when the source first runs in it
  (its imported modules) into the permanent generation (``gc.freeze``), which collections
  skip; objects created later are collected as before.
* Decoding allocates a list per record (the MessagePack body of a record batch), so the
  collector's young-generation passes ran about once per entry, and a full pass now and
  then. :func:`collector_paused` turns automatic collection off while a task decodes
  and collects the young generations itself at each Arrow batch it hands to Spark -- a
  pass over the few objects alive then, so cyclic garbage (there is almost none: ~400
  objects per million rows) cannot pile up over a long task.

Reference counting frees everything else as usual; only cycle detection is deferred.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")


def freeze_worker_heap() -> None:
    """Once per process: exempt the objects this process holds now from collections (see
    the module doc). A process that froze objects already (the source, or its own code)
    is left as it is."""
    if gc.get_freeze_count() == 0:
        gc.freeze()


def collector_paused(items: Iterator[T]) -> Iterator[T]:
    """``items``, produced with automatic collection off; the young generations are
    collected at each item (an Arrow batch) and the collector's previous state is restored
    when the iterator ends, fails or is closed."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for item in items:
            gc.collect(1)
            yield item
    finally:
        if was_enabled:
            gc.enable()
