"""Cluster files and options: every mistake is one clear ConfigError, nothing is created."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftlog.config import check_data_dir, load_peer_config
from raftlog.errors import ConfigError
from raftlog.options import RaftOptions

BASE = """
[cluster]
ident = "c1"
data_dir = "{data}"
[raft]
election_timeout_min = 250
[[peers]]
id = "1"
url = "tcp://127.0.0.1:9001"
pub_url = "tcp://127.0.0.1:9002"
[peers.raft]
election_timeout_max = 400
[[peers]]
id = "2"
url = "tcp://[::1]:9003"
pub_url = "tcp://[::1]:9004"
bind = "tcp://0.0.0.0:9003"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text.replace("{data}", str(tmp_path / "data")))
    return path


def test_a_peer_gets_file_options_then_its_own_overrides_then_cli_overrides(tmp_path: Path) -> None:
    path = write(tmp_path, BASE)
    one = load_peer_config(path, "1", overrides={"rpc_timeout": 40})
    assert one.ident == "c1" and one.url == one.bind_url == "tcp://127.0.0.1:9001"
    assert (one.options.election_timeout_min, one.options.election_timeout_max) == (250, 400)
    assert one.options.rpc_timeout == 40
    assert one.data_dir == tmp_path / "data" / "1"
    assert [p.id for p in one.peers] == ["1", "2"] and one.is_member
    two = load_peer_config(path, "2")
    assert two.bind_url == "tcp://0.0.0.0:9003" and two.url == "tcp://[::1]:9003"
    assert two.options.election_timeout_max == RaftOptions().election_timeout_max


def test_defaults_are_the_references() -> None:
    o = RaftOptions()
    assert (o.election_timeout_min, o.election_timeout_max, o.rpc_timeout) == (200, 300, 50)
    assert (o.append_entries_heartbeat_interval, o.peer_msg_data_size) == (70, 65536)
    assert (o.request_id_ttl, o.request_id_ttl_accept_margin) == (8 * 3600_000, 900_000)
    assert o.max_log_entry_data_size == 10 * 1024 * 1024


def test_a_peer_outside_the_file_needs_its_urls(tmp_path: Path) -> None:
    path = write(tmp_path, BASE)
    with pytest.raises(ConfigError, match="not in"):
        load_peer_config(path, "9")
    outside = load_peer_config(
        path, "9", url="tcp://127.0.0.1:9101", pub_url="tcp://127.0.0.1:9102"
    )
    assert not outside.is_member


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('id = "2"', 'id = "1"'), "duplicate peer id"),
        (("tcp://[::1]:9003", "tcp://127.0.0.1:9001"), "duplicate peer url"),
        (("tcp://127.0.0.1:9001", "tcp://example.com:9001"), "url"),
        (("election_timeout_min = 250", "election_timeout_min = 50"), "election_timeout_min"),
        (("election_timeout_min = 250", "no_such_option = 1"), "unknown option"),
        (("election_timeout_min = 250", 'election_timeout_min = "x"'), "integer"),
        (('ident = "c1"', "ident = 5"), "ident"),
        (("[raft]", "[rafts]"), "unknown section"),
        (("[[peers]]", "[[peers]"), "not valid TOML"),
    ],
)
def test_mistakes_are_one_clear_error(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    path = write(tmp_path, BASE.replace(*change, 1))
    with pytest.raises(ConfigError, match=message):
        load_peer_config(path, "1")
    assert not (tmp_path / "data").exists()


def test_null_options_and_the_ttl_cache_rule() -> None:
    o = RaftOptions().with_overrides({"request_id_ttl": "null", "request_id_cache_max": 10}, "t")
    assert o.validate().request_id_ttl is None
    with pytest.raises(ConfigError, match="request_id_cache_max"):
        RaftOptions().with_overrides({"request_id_ttl": "null"}, "t").validate()


def test_data_dir_checks_do_not_create_anything(tmp_path: Path) -> None:
    check_data_dir(tmp_path / "a" / "b")
    assert not (tmp_path / "a").exists()
    blocker = tmp_path / "f"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="not a directory"):
        check_data_dir(blocker / "x")


HTTP = """
[cluster]
ident = "c1"
data_dir = "{data}"
ready_max_lag = 50
[[peers]]
id = "1"
url = "tcp://127.0.0.1:9001"
pub_url = "tcp://127.0.0.1:9002"
http_url = "http://127.0.0.1:9049/"
[[peers]]
id = "2"
url = "tcp://127.0.0.1:9003"
pub_url = "tcp://127.0.0.1:9004"
ready_max_lag = 7
"""


def test_http_url_is_per_peer_and_off_when_absent(tmp_path: Path) -> None:
    path = write(tmp_path, HTTP)
    one = load_peer_config(path, "1")
    assert one.http_url == "http://127.0.0.1:9049"
    assert one.peer_http_urls == (("1", "http://127.0.0.1:9049"),)
    assert one.ready_max_lag == 50
    two = load_peer_config(path, "2")
    assert two.http_url is None and two.ready_max_lag == 7


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"127.0.0.1:9049"', r"http\(s\)://HOST:PORT"),
        ('"http://127.0.0.1"', r"http\(s\)://HOST:PORT"),
        ('"http://127.0.0.1:99999"', r"http\(s\)://HOST:PORT"),
        ("9049", r"http\(s\)://HOST:PORT"),
        ('"ftp://127.0.0.1:9049"', r"http\(s\)://HOST:PORT"),
        ('"https://127.0.0.1:9049"', "needs tls_cert and tls_key"),
    ],
)
def test_a_bad_http_url_is_one_clear_error(tmp_path: Path, value: str, message: str) -> None:
    path = write(tmp_path, HTTP.replace('"http://127.0.0.1:9049/"', value))
    with pytest.raises(ConfigError, match=message):
        load_peer_config(path, "1")


def test_the_http_table_has_safe_defaults_and_checks_its_values(tmp_path: Path) -> None:
    """Issue #25: connection caps, time-outs and TLS files of the HTTP listener."""
    one = load_peer_config(write(tmp_path, HTTP), "1")
    assert one.http.max_connections == 1000 and one.http.max_connections_per_address == 64
    assert one.http.header_timeout_ms == 10_000 and one.http.tls_cert is None
    assert one.http.connection_cap(nofile=1024) == 512  # half the descriptors at most
    assert one.http.connection_cap(nofile=100_000) == 1000
    tls = HTTP.replace('"http://127.0.0.1:9049/"', '"https://127.0.0.1:9049"')
    tls += '\n[http]\ntls_cert = "c.pem"\ntls_key = "k.pem"\nmax_connections = 50\n'
    secured = load_peer_config(write(tmp_path, tls), "1")
    assert secured.http_url == "https://127.0.0.1:9049"
    assert secured.http.tls_cert == tmp_path / "c.pem" and secured.http.max_connections == 50
    for bad, message in (
        ("max_connections = 0", "positive integer"),
        ('header_timeout_ms = "1s"', "positive integer"),
        ('tls_cert = "c.pem"', "go together"),
        ("monitoring_token = 1", "true or false"),
        ("colour = 1", "unknown option"),
    ):
        with pytest.raises(ConfigError, match=message):
            load_peer_config(write(tmp_path, HTTP + f"\n[http]\n{bad}\n"), "1")


def test_a_bad_ready_max_lag_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, HTTP.replace("ready_max_lag = 7", "ready_max_lag = -1"))
    with pytest.raises(ConfigError, match="ready_max_lag"):
        load_peer_config(path, "2")


def test_storage_thread_is_off_by_default_and_must_be_a_bool() -> None:
    assert RaftOptions().storage_thread is False
    on = RaftOptions().with_overrides({"storage_thread": True}, "t").validate()
    assert on.storage_thread is True
    with pytest.raises(ConfigError, match="storage_thread"):
        RaftOptions().with_overrides({"storage_thread": 1}, "t").validate()


def test_the_dead_connection_timeout_defaults_on_and_checks_its_range() -> None:
    """TCP keepalive on the connections a peer serves: 60 s by default, 0 turns it off, and
    the kernel's probes need whole seconds."""
    assert RaftOptions().dead_connection_timeout == 60_000
    off = RaftOptions().with_overrides({"dead_connection_timeout": 0}, "t").validate()
    assert off.dead_connection_timeout == 0
    for bad in (-1, 2_999, 7_200_001):
        with pytest.raises(ConfigError, match="dead_connection_timeout"):
            RaftOptions().with_overrides({"dead_connection_timeout": bad}, "t").validate()
