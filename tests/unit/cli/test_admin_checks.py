"""raftlog-admin's local checks and formatting: pure functions with plain values."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from raftlog.cli.admin import main
from raftlog.cli.admin_cluster import (
    behind,
    check_with_leader_rule,
    even_warning,
    new_configuration,
)
from raftlog.cli.admin_io import UsageError, plain_table
from raftlog.cli.admin_parser import build_parser
from raftlog.cli.admin_topics import property_lines
from raftlog.errors import ConfigUpdateError
from raftlog.rpc.messages import Peer, RequestLogInfoResponse
from raftlog.topics.records import TopicProperties

CURRENT = [
    Peer("1", "tcp://10.0.0.1:8047"),
    Peer("2", "tcp://10.0.0.2:8047"),
    Peer("3", "tcp://10.0.0.3:8047"),
]


def test_new_configuration_of_each_action() -> None:
    added = new_configuration("add", ["4=tcp://10.0.0.4:8047"], CURRENT)
    assert [p.id for p in added] == ["1", "2", "3", "4"]
    assert [p.id for p in new_configuration("remove", ["2"], CURRENT)] == ["1", "3"]
    assert [p.id for p in new_configuration("replace", ["9=tcp://10.0.0.9:1"], CURRENT)] == ["9"]
    with pytest.raises(UsageError, match="not in the configuration: 4"):
        new_configuration("remove", ["1", "4"], CURRENT)
    with pytest.raises(UsageError, match="already in the configuration: 1"):
        new_configuration("add", ["1=tcp://10.0.0.9:1"], CURRENT)


def test_the_leaders_own_rule_refuses_before_anything_is_sent() -> None:
    with pytest.raises(ConfigUpdateError, match="at least one peer") as refused:
        check_with_leader_rule(CURRENT, new_configuration("remove", ["1", "2", "3"], CURRENT))
    assert refused.value.status == 2
    with pytest.raises(ConfigUpdateError, match="no change"):
        check_with_leader_rule(CURRENT, CURRENT)
    check_with_leader_rule(CURRENT, CURRENT[:2])  # a real change passes


def test_even_voter_sets_get_a_warning() -> None:
    assert even_warning(CURRENT) is None
    warning = even_warning([*CURRENT, Peer("4", "tcp://10.0.0.4:8047")])
    assert warning is not None and "4 voters tolerate 1 failure(s)" in warning
    assert "3 for a quorum" in warning


def test_lag_is_measured_against_the_leaders_commit() -> None:
    def info(commit: int, last: int) -> RequestLogInfoResponse:
        return RequestLogInfoResponse(
            is_leader=True,
            leader_id="1",
            term=3,
            first_index=1,
            last_applied=commit,
            commit_index=commit,
            last_index=last,
            snapshot_size=0,
            prune_index=0,
        )

    assert behind(info(100, 100), info(0, 40)) == 60
    assert behind(info(100, 100), info(0, 150)) == 0


def test_unset_topic_limits_read_unlimited() -> None:
    shown = dict(property_lines(TopicProperties(retention_ms=1000, max_bytes=None)))
    assert shown == {
        "retention_ms": "1000",
        "max_bytes": "unlimited",
        "max_record_bytes": "unlimited",
        "description": "-",  # an unset text is not a limit (#26)
        "cleanup_policy": "-",
        "tombstone_retention_ms": "unlimited",
    }


def test_plain_tables_align_columns() -> None:
    assert plain_table(("A", "BB"), [("xyz", "1")]).splitlines() == ["A    BB", "xyz  1"]


def test_usage_errors_are_one_line_with_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["bogus"], ["config", "add"], ["read", "--count", "many"]):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "--help" in err, err


def test_missing_publish_file_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["--peers", "tcp://127.0.0.1:1", "--ident", "x", "publish", str(tmp_path / "no")])
    assert code == 2
    assert capsys.readouterr().err.strip().endswith("no: no such file")


def test_every_subcommand_has_its_own_help_with_an_example() -> None:
    def leaves(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, str]]:
        found = [(path, parser.format_help())]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    found += leaves(child, f"{path} {name}")
        return found

    helps = leaves(build_parser(), "raftlog-admin")
    assert len(helps) >= 15
    for path, text in helps[1:]:
        assert "example" in text and "raftlog-admin " in text.split("example", 1)[1], path
    texts = [text for _, text in helps]
    assert len(set(texts)) == len(texts)  # no two commands share a help text
