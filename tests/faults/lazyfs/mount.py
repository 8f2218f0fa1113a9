"""``LazyMount``: start a lazy file system at a directory, cut its power, unmount it.

Tests call ``require_fuse()`` first: it skips (with the reason) where FUSE cannot work — no
``/dev/fuse``, no ``fusermount3``, no ``mfusepy``, or not allowed to mount (containers without
``CAP_SYS_ADMIN``). ``make test`` installs Debian's ``fuse3`` (target ``fuse``) and the binding
(``dev`` extra).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

TESTS_DIR = Path(__file__).resolve().parents[2]


def fuse_unavailable() -> str | None:
    """Why a lazy file system cannot be mounted here (None: it can)."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse (load the fuse module, or give the container the device)"
    if shutil.which("fusermount3") is None:
        return "fusermount3 missing (Debian: apt-get install fuse3; `make fuse` does it)"
    try:
        import mfusepy  # noqa: F401, PLC0415 - only to learn whether it is installed
    except (ImportError, OSError) as exc:
        return f"mfusepy unusable ({exc}): pip install '.[dev]'"
    return None


def require_fuse() -> None:
    """Skip the calling test, saying why, when no lazy file system can be mounted."""
    reason = fuse_unavailable() or _probe()
    if reason:
        pytest.skip(f"lazy file system unavailable: {reason}")


_probed: list[str | None] = []


def _probe() -> str | None:
    """Mount once per process to learn whether mounting is allowed at all."""
    if not _probed:
        with tempfile.TemporaryDirectory(prefix="lazyfs-probe-") as tmp:
            try:
                LazyMount(Path(tmp) / "m").close()
                _probed.append(None)
            except (OSError, RuntimeError) as exc:
                _probed.append(f"mounting failed: {exc}")
    return _probed[0]


class LazyMount:
    """One lazy file system mounted at ``point`` (created if missing), served by a child
    process; ``power_cut`` drops what is not durable; ``close`` unmounts (idempotent)."""

    def __init__(self, point: Path, timeout: float = 15.0) -> None:
        self.point = point
        point.mkdir(parents=True, exist_ok=True)
        self._tmp = tempfile.mkdtemp(prefix="lazyfs-")
        self.control = os.path.join(self._tmp, "control")
        self.log_path = Path(self._tmp) / "lazyfs.log"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), *sys.path])}
        with open(self.log_path, "wb") as log:
            self.process: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-m", "faults.lazyfs", str(point), self.control],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        deadline = time.monotonic() + timeout
        while not (os.path.ismount(point) and os.path.exists(self.control)):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"lazyfs did not mount at {point}: {self._log_tail()}")
            time.sleep(0.02)

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-2000:].strip() or "(no output)"
        return "(no log)"

    def command(self, line: str) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30)
            sock.connect(self.control)
            sock.sendall(line.encode() + b"\n")
            answer = b""
            while not answer.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    raise RuntimeError(f"lazyfs control closed: {self._log_tail()}")
                answer += chunk
        reply: dict[str, Any] = json.loads(answer)
        if not reply.get("ok"):
            raise RuntimeError(f"lazyfs {line!r}: {reply}")
        return reply

    def power_cut(self, torn_seed: int | None = None) -> dict[str, Any]:
        """Drop everything not durable; the processes using the mount must be dead already
        (their open files die with the power). Returns what was dropped."""
        return self.command("cut" if torn_seed is None else f"cut {torn_seed}")

    def stats(self) -> dict[str, Any]:
        return self.command("stats")

    def close(self) -> None:
        if self.process is not None:
            if os.path.ismount(self.point):
                done = subprocess.run(
                    ["fusermount3", "-u", str(self.point)], capture_output=True, check=False
                )
                if done.returncode != 0:
                    subprocess.run(
                        ["fusermount3", "-u", "-z", str(self.point)],
                        capture_output=True,
                        check=False,
                    )
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
            self.process = None
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> LazyMount:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
