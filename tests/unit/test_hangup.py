"""SIGHUP's comparison of the running settings with the cluster file on disk."""

from __future__ import annotations

from pathlib import Path

from raftlog.config import load_peer_config
from raftlog.server.hangup import HangupHandler, changed_settings

CLUSTER = """
[cluster]
ident = "hup"
data_dir = "{data}"
[raft]
election_timeout_min = 200
[[peers]]
id = "1"
url = "tcp://127.0.0.1:18047"
pub_url = "tcp://127.0.0.1:18048"
"""


class _Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, object]]] = []

    def info(self, event: str, **fields: object) -> None:
        self.events.append(("info", event, fields))

    def warning(self, event: str, **fields: object) -> None:
        self.events.append(("warning", event, fields))


def _write(path: Path, text: str) -> Path:
    path.write_text(text.format(data=path.parent / "data"))
    return path


def test_only_real_differences_are_reported(tmp_path: Path) -> None:
    path = _write(tmp_path / "c.toml", CLUSTER)
    running = load_peer_config(path, "1")
    assert changed_settings(running, load_peer_config(path, "1")) == []
    _write(path, CLUSTER.replace("= 200", "= 250").replace('"hup"', '"other"'))
    assert changed_settings(running, load_peer_config(path, "1")) == [
        "ident",
        "election_timeout_min",
    ]


def test_one_event_per_signal_whatever_the_file_says(tmp_path: Path) -> None:
    path = _write(tmp_path / "c.toml", CLUSTER)
    running = load_peer_config(path, "1")
    log = _Log()
    handler = HangupHandler(running, lambda: load_peer_config(path, "1"), log)
    handler(1, None)
    _write(path, CLUSTER.replace("= 200", "= 250"))
    handler(1, None)
    path.write_text("not toml [")
    handler(1, None)
    assert [(level, event) for level, event, _ in log.events] == [
        ("info", "sighup_handled"),
        ("warning", "sighup_handled"),
        ("warning", "sighup_handled"),
    ]
    first, second, third = (fields for _, _, fields in log.events)
    assert first["config_unchanged"] is True and first["log_reopened"] is False
    assert second["restart_required"] == ["election_timeout_min"]
    assert "config_error" in third
