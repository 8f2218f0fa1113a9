"""``raftlog-tool`` on a small store: inspect, dump, verify, and clean failures (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from storage_helpers import batch, checkpoint, entry

from raftlog.cli.tool import main
from raftlog.entry import LogEntry
from raftlog.rpc.messages import ConfigPayload, Peer
from raftlog.storage import _records as rec
from raftlog.storage.base import HardState
from raftlog.storage.rocks import open_log_database, open_storage


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "peer"
    log, hard_state, snapshots = open_storage(path)
    log.append(1, [*batch(1, 1, 3), checkpoint(2), LogEntry(bytes(12), 7, 2, b"\xff\x00")])
    log.append(6, [entry(3, 6, "héllo wörld".encode())])
    hard_state.save(
        HardState(3, "p1", ConfigPayload((Peer("p1", "tcp://127.0.0.1:1"),)), 0, last_applied=5)
    )
    snapshots.install(2, 1, b"snapshot-bytes")
    log.compact(2, 1)
    for store in (log, hard_state, snapshots):
        store.close()
    for made in (path, *path.rglob("*")):  # private, as a peer leaves it (whatever the umask
        made.chmod(made.stat().st_mode & 0o700)  # this process runs with: verify warns else)
    return path


def listing(path: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in path.rglob("*")}


def test_inspect(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = listing(data_dir)
    assert main(["inspect", str(data_dir), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["first_index"], info["last_index"], info["last_term"]) == (3, 6, 3)
    assert (info["log_snapshot_index"], info["log_snapshot_term"]) == (2, 1)
    assert info["hard_state"]["current_term"] == 3
    assert info["hard_state"]["config"]["new"] == [["p1", "tcp://127.0.0.1:1"]]
    assert info["snapshot"] == {"index": 2, "term": 1, "size": 14}
    assert info["log_bytes_on_disk"] > 0
    assert main(["inspect", str(data_dir)]) == 0
    assert "last_index" in capsys.readouterr().out
    assert listing(data_dir) == before  # read-only: nothing created or touched


def test_dump(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dump", str(data_dir), "--from", "4", "--to", "6", "--json", "--data"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["index"] for r in rows] == [4, 5, 6]
    assert [r["type"] for r in rows] == ["CHECKPOINT", "UNKNOWN(7)", "STATE"]
    assert rows[0]["preview"] == "null"
    assert rows[1]["data_hex"] == "ff00"
    assert rows[2]["request_id"] == entry(3, 6).request_id.hex()
    assert "héllo" in rows[2]["preview"]
    assert main(["dump", str(data_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and lines[0].split()[0] == "3"


def test_dump_out_of_range_is_a_usage_error(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dump", str(data_dir), "--from", "1", "--to", "3"]) == 2
    assert "outside the log" in capsys.readouterr().err


def test_verify_ok_and_corrupt(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(data_dir)]) == 0
    assert capsys.readouterr().out.startswith("OK: 4 entries")
    database = open_log_database(data_dir / "log")
    database.raw_put_for_tests(rec.entry_key(4), b"\x00" * 30)
    database.release()
    assert main(["verify", str(data_dir)]) == 1
    out = capsys.readouterr().out
    assert "CORRUPT: entry 4: checksum mismatch" in out


def test_verify_reports_bad_snapshot(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = data_dir / "snapshots" / "snapshot.bin"
    raw = bytearray(snapshot.read_bytes())
    raw[-1] ^= 0x40
    snapshot.write_bytes(bytes(raw))
    assert main(["verify", str(data_dir)]) == 1
    assert "snapshot data checksum mismatch" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["inspect", "dump", "verify"])
def test_bad_directories_exit_2_without_traceback(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, str(tmp_path / "nope")]) == 2
    assert "no such directory" in capsys.readouterr().err
    assert not (tmp_path / "nope").exists()
    (tmp_path / "file").write_text("x")
    assert main([command, str(tmp_path / "file")]) == 2
    (tmp_path / "foreign").mkdir()
    assert main([command, str(tmp_path / "foreign")]) == 2
    assert "not a raftlog data directory" in capsys.readouterr().err
    assert list((tmp_path / "foreign").iterdir()) == []


def test_console_script_help_and_usage_errors(data_dir: Path) -> None:
    tool = Path(sys.executable).parent / "raftlog-tool"
    assert tool.exists()
    help_run = subprocess.run([tool, "--help"], capture_output=True, text=True, check=False)
    assert help_run.returncode == 0
    assert "inspect" in help_run.stdout and "Exit codes" in help_run.stdout
    bad = subprocess.run([tool, "dump"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    ok = subprocess.run([tool, "verify", data_dir], capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
