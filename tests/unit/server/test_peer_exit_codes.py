"""``raftlog-peer``'s exit codes when things fail (issue #12, finding 2).

A full disk ends the run with ``StorageError`` (exit 3); closing the node afterwards fails
again (the topic index's RocksDB flush hits ENOSPC once more). That second failure used to
escape ``main()``'s ``finally`` as a traceback with exit 1, masking the documented 3.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from raftlog.cli import peer as peer_main
from raftlog.errors import StorageError
from raftlog.server.exit_codes import EXIT_OK, EXIT_STORAGE


def write_config(tmp_path: Path) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(
        f'[cluster]\nident="t"\ndata_dir="{tmp_path / "data"}"\n'
        '[[peers]]\nid="1"\nurl="tcp://127.0.0.1:1"\npub_url="tcp://127.0.0.1:2"\n'
    )
    return path


class FakeNode:
    """Stands in for PeerNode: ``run`` and ``close`` fail as told."""

    run_error: BaseException | None = None
    close_error: BaseException | None = None
    closed = 0

    def __init__(self, settings: Any) -> None:
        self.settings = settings

    def run(self) -> None:
        if self.run_error is not None:
            raise self.run_error

    def stop(self) -> None:
        pass

    def request_reload(self) -> None:
        pass

    def close(self) -> None:
        type(self).closed += 1
        if self.close_error is not None:
            raise self.close_error


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> type[FakeNode]:
    class Node(FakeNode):
        pass

    monkeypatch.setattr(peer_main, "PeerNode", Node)
    return Node


def run_main(tmp_path: Path) -> int:
    return peer_main.main(["-c", str(write_config(tmp_path)), "--id", "1", "--log-format", "json"])


def test_a_failing_close_after_a_storage_failure_keeps_exit_code_3(
    tmp_path: Path, fake: type[FakeNode], capfd: pytest.CaptureFixture[str]
) -> None:
    fake.run_error = StorageError("append: No space left on device")
    fake.close_error = StorageError("topic index flush: No space left on device")
    assert run_main(tmp_path) == EXIT_STORAGE
    assert fake.closed == 1
    out = capfd.readouterr()
    assert "storage_failed" in out.out + out.err and "close_failed" in out.out + out.err


def test_a_failing_close_after_a_clean_run_is_a_storage_failure(
    tmp_path: Path, fake: type[FakeNode]
) -> None:
    fake.close_error = StorageError("flush: No space left on device")
    assert run_main(tmp_path) == EXIT_STORAGE


def test_a_clean_run_and_close_exit_0(tmp_path: Path, fake: type[FakeNode]) -> None:
    assert run_main(tmp_path) == EXIT_OK and fake.closed == 1


def test_an_unexpected_error_is_not_masked_by_a_failing_close(
    tmp_path: Path, fake: type[FakeNode]
) -> None:
    fake.run_error = RuntimeError("a bug")
    fake.close_error = StorageError("flush failed too")
    with pytest.raises(RuntimeError, match="a bug"):  # the original error, exit 1 + traceback
        run_main(tmp_path)
    assert fake.closed == 1
