"""Issue #25, finding 9: data at rest is private whatever the umask. A peer started under
umask 022 creates its data dir 0700 and every file 0600 (RocksDB's too) and tightens a data
dir left loose by an older version; ``raftlog-tool backup`` and ``restore`` produce private
copies; ``raftlog-tool verify`` warns about anything looser."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.cluster import PeerCluster
from integration.peer.updates import update

TOOL = Path(sys.executable).with_name("raftlog-tool")


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """What most shells run with: the children inherit it."""
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def _tool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


def _modes(root: Path) -> dict[str, int]:
    out = {".": stat.S_IMODE(root.stat().st_mode)}
    for path in root.rglob("*"):
        if not path.is_symlink():
            out[str(path.relative_to(root))] = stat.S_IMODE(path.stat().st_mode)
    return out


def _assert_private(root: Path) -> None:
    modes = _modes(root)
    assert len(modes) > 5, modes  # the log's RocksDB files are there
    loose = {name: f"{mode:04o}" for name, mode in modes.items() if mode & 0o077}
    assert not loose, loose


def test_data_backup_and_restore_are_private_whatever_the_umask(
    tmp_path: Path, loose_umask: None
) -> None:
    with PeerCluster(tmp_path, ids=("1",)) as cluster:
        peer = cluster.peers["1"]
        stale = peer.data_dir / "left-by-an-older-version"
        stale.parent.mkdir(parents=True)
        stale.write_bytes(b"x")
        os.chmod(stale, 0o644)
        os.chmod(peer.data_dir, 0o755)
        cluster.start()
        cluster.wait_leader()
        for n in range(5):
            assert update(cluster, f"entry {n}".encode()) > 0
        _assert_private(peer.data_dir)
        backup = tmp_path / "backup"
        done = _tool("backup", peer.data_dir, backup)
        assert done.returncode == 0, done.stdout + done.stderr
        _assert_private(backup)
    restored = tmp_path / "restored"
    restored.mkdir(mode=0o755)  # an empty destination someone made beforehand
    os.chmod(restored, 0o755)
    done = _tool("restore", backup, restored)
    assert done.returncode == 0, done.stdout + done.stderr
    _assert_private(restored)
    clean = _tool("verify", restored)
    assert clean.returncode == 0 and "WARNING" not in clean.stdout, clean.stdout
    some_file = next(p for p in restored.rglob("*") if p.is_file())
    os.chmod(some_file, 0o644)
    warned = _tool("verify", restored)
    assert warned.returncode == 0, warned.stdout  # readable is not corrupt
    assert f"WARNING: {some_file}: mode 0644" in warned.stdout, warned.stdout
