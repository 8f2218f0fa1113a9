"""The disk guard against a real filesystem that fills (issue #33 item 10): three peers on
a small tmpfs; a ballast file takes the free space below ``min_free_disk_bytes``; the
leader refuses publishes with ``DiskFull`` while topic deletes and compaction still work,
and accepts publishes again by itself once the ballast is gone."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.cluster import PeerCluster, wait_for

ADMIN = Path(sys.executable).parent / "raftlog-admin"
MiB = 1 << 20
THRESHOLD = 24 * MiB


@pytest.fixture
def small_disk() -> Iterator[Path]:
    """A 96 MiB tmpfs of our own (needs root, as `make test` has in CI containers), outside
    pytest's basetemp: another run's cleanup of old basetemps must not reach into it."""
    mount = Path(tempfile.mkdtemp(prefix="raftlog-disk-guard-"))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", str(mount)],
        capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
        mount.rmdir()


def test_a_full_disk_refuses_publishes_keeps_deletes_and_compaction_and_recovers(
    small_disk: Path,
) -> None:
    with PeerCluster(small_disk, raft={"min_free_disk_bytes": THRESHOLD}) as cluster:
        cluster.start()
        cluster.wait_stable_leader(60)

        def admin(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [str(ADMIN), "--config", str(cluster.config_path), "--timeout", "30", *args],
                input=stdin, capture_output=True, text=True, timeout=120, check=False,
            )

        for name in ("orders", "scratch"):
            assert admin("topics", "create", name).returncode == 0
        assert admin("publish", "--topic", "orders", stdin="o-1\n").returncode == 0

        ballast = small_disk / "ballast"
        free = shutil.disk_usage(small_disk).free
        with ballast.open("wb") as f:  # leave THRESHOLD / 2 free: below the threshold
            f.truncate(0)
            f.write(b"\0" * (free - THRESHOLD // 2))

        attempts: list[str] = []

        def refused() -> str | None:  # the guard looks every second: earlier tries pass
            attempts.append(f"try-{len(attempts)}")
            result = admin("publish", "--topic", "orders", stdin=attempts[-1] + "\n")
            return result.stderr if result.returncode == 1 else None

        error = wait_for("the leader to refuse publishes", refused, timeout=60)
        assert "DiskFull" in error and "min_free_disk_bytes" in error
        assert "interrupted" not in error
        # what frees space still works
        deleted = admin("topics", "delete", "scratch")
        assert deleted.returncode == 0, deleted.stderr
        compacted = admin("compact")
        assert compacted.returncode == 0, compacted.stderr

        ballast.unlink()
        wait_for(
            "publishes to be accepted again",
            lambda: admin("publish", "--topic", "orders", stdin="o-3\n").returncode == 0,
            timeout=60,
        )
        read = admin("read", "--topic", "orders")
        assert read.returncode == 0, read.stderr
        assert "o-1" in read.stdout and "o-3" in read.stdout
        assert f"\t{attempts[-1]}\n" not in read.stdout  # the refused record is not there
