"""``raftlog-admin publish``: stream lines (or whole files) into the log as they arrive.

Why streaming: ``tail -f app.log | raftlog-admin publish`` must publish each line when it is
written, not at EOF. A reader thread reads the input line by line (a blocking ``readline``
is the only portable way to read a pipe, a terminal or a file alike) and hands each record
to the event loop through a bounded queue, so a fast producer is slowed down to the
cluster's pace instead of filling memory. Up to ``in_flight`` updates are outstanding at
once on the one client connection (pipelined, like the reference's benchmark client).

What an interrupted run reports (Ctrl-C, or a failure): how many records the cluster
confirmed, the longest prefix of the input that is certainly in the log ("every line up to
N"), and how many later records were sent without an answer (they may still be appended:
an update whose answer was lost is not known to have failed). Resuming from line N+1 can
therefore duplicate at most those few records.

Progress (records, rate, and an ETA when the input size is known) is drawn with ``rich`` on
a terminal only; a pipe or a CI log gets just the final summary line.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Generic, TypeVar

import aiofiles
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from raftlog.cli.admin_io import UsageError
from raftlog.errors import ClusterUnavailableError, RaftlogError

T = TypeVar("T")

QUEUE_SIZE: Final = 1024
"""Records read ahead of the publishers (back-pressure on the input)."""


@dataclass(frozen=True, slots=True)
class InputRecord:
    """One record to publish: its 1-based line (or file) number and its bytes."""

    number: int
    data: bytes
    size_read: int
    """Input bytes this record consumed (newline included), for the progress ETA."""


@dataclass(slots=True)
class PublishReport(Generic[T]):
    """How far a publish got; see the module doc."""

    confirmed: dict[int, T] = field(default_factory=dict)
    """Input number -> result (log index or record id) of every confirmed record."""
    sent_unconfirmed: set[int] = field(default_factory=set)
    """Input numbers sent and not (yet) answered."""
    read: int = 0
    """Records read from the input so far."""

    def prefix(self) -> int:
        """The largest N such that records 1..N are all confirmed."""
        n = 0
        while n + 1 in self.confirmed:
            n += 1
        return n

    def last_result(self) -> T | None:
        """The result of the highest-numbered confirmed record."""
        return self.confirmed[max(self.confirmed)] if self.confirmed else None

    def interrupted_summary(self, unit: str) -> str:
        """One line for stderr after an interruption."""
        text = f"interrupted: {len(self.confirmed)} record(s) confirmed"
        text += f"; every {unit} up to {self.prefix()} is in the log"
        if self.sent_unconfirmed:
            text += (
                f"; {len(self.sent_unconfirmed)} later record(s) were sent without an answer"
                " (they may still be appended)"
            )
        return text


    def failure_summary(self, unit: str, error: BaseException) -> str | None:
        """The line for stderr after ``error`` ended the publish, or None when there is
        nothing true to report: a definite refusal (unknown topic, an ACL, an entry too
        large) before any record was confirmed appended nothing, and "interrupted: 0
        record(s) confirmed" would only mislead (issue #33 item 5). An interruption or a
        lost cluster always gets the line: records may be in the log without an answer."""
        refused = isinstance(error, RaftlogError | ValueError) and not isinstance(
            error, ClusterUnavailableError
        )
        if refused and not self.confirmed:
            return None
        if not (self.confirmed or self.sent_unconfirmed):
            return None
        return self.interrupted_summary(unit)


def check_inputs(files: Sequence[str]) -> list[str]:
    """The input names (``-`` is stdin); ``UsageError`` for a file that cannot be read,
    before anything is sent."""
    names = list(files) or ["-"]
    for name in names:
        if name == "-":
            continue
        path = Path(name)
        if not path.is_file():
            raise UsageError(f"{name}: no such file")
        if not os.access(path, os.R_OK):
            raise UsageError(f"{name}: not readable")
    return names


def input_size(names: Sequence[str]) -> int | None:
    """Total bytes of the inputs when all are regular files (for the ETA), else None."""
    total = 0
    for name in names:
        if name == "-":
            try:
                info = os.fstat(sys.stdin.fileno())
            except (OSError, ValueError):
                return None
            if not stat.S_ISREG(info.st_mode):
                return None
            total += info.st_size
        else:
            total += Path(name).stat().st_size
    return total


READ_CHUNK: Final = 64 * 1024


def _chunks(fd: int) -> Iterator[bytes]:
    """What ``fd`` yields, chunk by chunk, as soon as it is there.

    ``os.read`` on the raw descriptor rather than ``sys.stdin.buffer.readline``: a daemon
    thread blocked inside a buffered object's ``readline`` holds that object's lock, and an
    interpreter shutting down (Ctrl-C while waiting for input on a terminal) then aborts
    with "could not acquire lock for <stdin>"; a raw read holds no Python lock."""
    while chunk := os.read(fd, READ_CHUNK):
        yield chunk


def _records(fd: int, whole: bool) -> Iterator[tuple[bytes, int]]:
    """``(record, input bytes it used)``: one per line (newline and a trailing CR dropped,
    empty lines skipped), or the whole input as one record."""
    if whole:
        data = b"".join(_chunks(fd))
        yield data, len(data)
        return
    parts: list[bytes] = []  # the line being read, chunk by chunk (no quadratic copies)
    for chunk in _chunks(fd):
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            parts.append(chunk[start:end])
            line = b"".join(parts)
            parts = []
            start = end + 1
            if data := line.rstrip(b"\r"):
                yield data, len(line) + 1
        parts.append(chunk[start:])
    line = b"".join(parts)
    if data := line.rstrip(b"\r"):
        yield data, len(line)


async def read_whole_files(
    names: Sequence[str], queue: asyncio.Queue[InputRecord | None]
) -> None:
    """``--whole`` with named files: each file is one record, read with aiofiles.

    Why aiofiles here: a whole file may be large (up to the cluster's entry size limit), and
    reading it with a blocking call on the event loop would stall the publishes already in
    flight; aiofiles runs the reads in its thread pool and the loop keeps sending and
    receiving. Lines, and standard input, keep the reader thread (``start_reader``): a
    terminal read cannot be cancelled."""
    for number, name in enumerate(names, 1):
        async with aiofiles.open(name, "rb") as f:
            data = await f.read()
        await queue.put(InputRecord(number, data, len(data)))
    await queue.put(None)


def start_reader(
    names: Sequence[str],
    whole: bool,
    queue: asyncio.Queue[InputRecord | None],
    loop: asyncio.AbstractEventLoop,
) -> threading.Thread:
    """A daemon thread putting every record of ``names`` into ``queue``, then None.

    Lines are split on ``\\n`` (the newline is not part of the record); empty lines are
    skipped. With ``whole``, each input is one record. A daemon, because a thread blocked
    reading a terminal cannot be interrupted: the process exits without it."""

    def put(item: InputRecord | None) -> bool:
        if loop.is_closed():
            return False
        pending = queue.put(item)
        try:
            future = asyncio.run_coroutine_threadsafe(pending, loop)
        except RuntimeError:  # the loop is gone: stop reading
            pending.close()
            return False
        try:
            future.result()
        except BaseException:  # the publish was cancelled or failed: stop reading
            return False
        return True

    def run() -> None:
        number = 0
        for name in names:
            fd = sys.stdin.fileno() if name == "-" else os.open(name, os.O_RDONLY)
            try:
                for data, used in _records(fd, whole):
                    number += 1
                    if not put(InputRecord(number, data, used)):
                        return
            finally:
                if name != "-":
                    os.close(fd)
        put(None)

    thread = threading.Thread(target=run, name="raftlog-admin-input", daemon=True)
    thread.start()
    return thread


class _Progress:
    """Records, rate and ETA on stderr, drawn by rich on a terminal; a no-op elsewhere."""

    def __init__(self, total_bytes: int | None, enabled: bool) -> None:
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._records = 0
        if not enabled:
            return
        columns = [
            TextColumn("[bold]publish"),
            BarColumn(),
            TextColumn("{task.fields[records]} records"),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        ]
        self._bar = Progress(*columns, transient=True, refresh_per_second=5)
        self._task = self._bar.add_task("publish", total=total_bytes, records=0, rate="")
        self._bar.start()

    def advance(self, size: int) -> None:
        """One more record confirmed, that consumed ``size`` input bytes."""
        if self._bar is None or self._task is None:
            return
        self._records += 1
        task = self._bar.tasks[0]
        elapsed = task.elapsed or 0.0
        rate = f"{self._records / elapsed:,.0f}/s" if elapsed > 0 else ""
        self._bar.update(self._task, advance=size, records=self._records, rate=rate)

    def stop(self) -> None:
        """Remove the bar (the summary line follows)."""
        if self._bar is not None:
            self._bar.stop()


async def publish_stream(
    names: Sequence[str],
    publish: Callable[[bytes], Awaitable[T]],
    report: PublishReport[T],
    *,
    whole: bool,
    in_flight: int,
    show_progress: bool,
    check: Callable[[bytes], None] | None = None,
) -> None:
    """Publish every record of ``names`` with ``publish``, ``in_flight`` at a time, filling
    ``report`` as answers arrive (so a caller that is interrupted can still print it).

    ``check`` is run on each record before it is sent (e.g. the entry size limit); its
    exception stops the publish (records already sent are still awaited by nobody: the
    report says how far the input is certainly published)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[InputRecord | None] = asyncio.Queue(maxsize=QUEUE_SIZE)
    reader: asyncio.Task[None] | None = None
    if whole and "-" not in names:
        reader = loop.create_task(read_whole_files(names, queue))
    else:
        start_reader(names, whole, queue, loop)
    progress = _Progress(input_size(names), show_progress and sys.stderr.isatty())
    done = False

    async def worker() -> None:
        nonlocal done
        while not done:
            item = await queue.get()
            if item is None:
                done = True
                queue.put_nowait(None)  # wake the other workers
                return
            report.read = max(report.read, item.number)
            if check is not None:
                check(item.data)
            report.sent_unconfirmed.add(item.number)
            result = await publish(item.data)
            report.sent_unconfirmed.discard(item.number)
            report.confirmed[item.number] = result
            progress.advance(item.size_read)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(max(1, in_flight)):
                group.create_task(worker())
    except BaseExceptionGroup as group_error:
        # one line for the CLI: the first real cause, not the group
        raise group_error.exceptions[0] from None
    finally:
        if reader is not None:
            reader.cancel()
        progress.stop()
