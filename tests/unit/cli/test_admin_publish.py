"""The streaming publish loop with a plain fake publisher: what it sends, what it reports
when it stops early, and that it sends before the input ends."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from raftlog.cli import admin_publish
from raftlog.cli.admin_io import UsageError
from raftlog.cli.admin_publish import PublishReport, _records, check_inputs, publish_stream
from raftlog.errors import EntryTooLargeError


class FakeLog:
    """Appends what it is given; optionally blocks some records until released."""

    def __init__(self, hold: frozenset[bytes] = frozenset()) -> None:
        self.entries: list[bytes] = []
        self.hold = hold
        self.release = asyncio.Event()

    async def publish(self, data: bytes) -> int:
        if data in self.hold:
            await self.release.wait()
        self.entries.append(data)
        return len(self.entries)


async def test_every_nonempty_line_is_published(tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_bytes(b"a\n\nb\r\nc")
    log, report = FakeLog(), PublishReport[int]()
    await publish_stream(
        [str(source)], log.publish, report, whole=False, in_flight=4, show_progress=False
    )
    assert sorted(log.entries) == [b"a", b"b", b"c"]
    assert report.prefix() == 3 and not report.sent_unconfirmed


async def test_whole_files_are_one_record_each(tmp_path: Path) -> None:
    one, two = tmp_path / "1", tmp_path / "2"
    one.write_bytes(b"x\ny\n")
    two.write_bytes(b"z")
    log, report = FakeLog(), PublishReport[int]()
    await publish_stream(
        [str(one), str(two)], log.publish, report, whole=True, in_flight=1, show_progress=False
    )
    assert log.entries == [b"x\ny\n", b"z"]


async def test_interruption_reports_the_certain_prefix(tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_bytes(b"1\n2\n3\n4\n")
    log, report = FakeLog(hold=frozenset({b"2"})), PublishReport[int]()
    task = asyncio.create_task(
        publish_stream(
            [str(source)], log.publish, report, whole=False, in_flight=4, show_progress=False
        )
    )
    while len(log.entries) < 3:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert report.prefix() == 1 and report.sent_unconfirmed == {2}
    summary = report.interrupted_summary("line")
    assert "3 record(s) confirmed; every line up to 1 is in the log" in summary
    assert "1 later record(s) were sent without an answer" in summary


async def test_lines_are_sent_as_they_arrive_not_at_eof() -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"first\n")
    log, report = FakeLog(), PublishReport[int]()
    fifo = f"/dev/fd/{read_fd}"
    task = asyncio.create_task(
        publish_stream([fifo], log.publish, report, whole=False, in_flight=2, show_progress=False)
    )
    try:
        async with asyncio.timeout(10):
            while not log.entries:
                await asyncio.sleep(0.01)
        assert log.entries == [b"first"] and not task.done()  # the writer is still open
    finally:
        os.close(write_fd)
        async with asyncio.timeout(10):
            await task
        os.close(read_fd)


async def test_a_failing_check_stops_with_its_own_error(tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_bytes(b"ok\n" + b"x" * 50 + b"\n")

    def check(data: bytes) -> None:
        if len(data) > 10:
            raise EntryTooLargeError(len(data), 10)

    log, report = FakeLog(), PublishReport[int]()
    with pytest.raises(EntryTooLargeError):
        await publish_stream(
            [str(source)],
            log.publish,
            report,
            whole=False,
            in_flight=1,
            show_progress=False,
            check=check,
        )
    assert log.entries == [b"ok"]


def test_missing_inputs_are_bad_usage(tmp_path: Path) -> None:
    assert check_inputs([]) == ["-"]
    with pytest.raises(UsageError, match="no such file"):
        check_inputs([str(tmp_path / "missing.txt")])


def test_lines_split_across_reads_are_joined(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin_publish, "READ_CHUNK", 3)  # every line spans several reads
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"al")
    os.write(write_fd, b"pha\r\n\nbe")
    os.write(write_fd, b"ta\ngamma")
    os.close(write_fd)
    try:
        records = list(_records(read_fd, whole=False))
    finally:
        os.close(read_fd)
    assert records == [(b"alpha", 7), (b"beta", 5), (b"gamma", 5)]
