"""How the client reads update and config-update answers (pure: response in, outcome out)."""

from __future__ import annotations

import pytest

from raftlog.client.answers import config_update_outcome, update_outcome
from raftlog.client.routing import WAIT, Done, Redirect
from raftlog.errors import ConfigUpdateError, RequestExpiredError
from raftlog.rpc.messages import (
    ConfigUpdateErrorInfo,
    ConfigUpdateResponse,
    ConfigUpdateStatus,
    RequestUpdateResponse,
    UpdateStatus,
)

RID = bytes(12)


def test_update_answers() -> None:
    assert update_outcome(RID, RequestUpdateResponse(RID, UpdateStatus.DONE, 7), "u") == Done(7)
    assert update_outcome(RID, RequestUpdateResponse(RID, UpdateStatus.ACCEPTED), "u") is WAIT
    redirect = update_outcome(
        RID, RequestUpdateResponse(RID, UpdateStatus.NOT_LEADER, None, "2"), "u"
    )
    assert redirect == Redirect("2")
    with pytest.raises(RequestExpiredError):
        update_outcome(RID, RequestUpdateResponse(RID, UpdateStatus.EXPIRED), "u")


def test_config_update_answers() -> None:
    ok = ConfigUpdateStatus.OK
    assert config_update_outcome(RID, ConfigUpdateResponse(RID, ok), "u") is WAIT
    assert config_update_outcome(RID, ConfigUpdateResponse(RID, ok, index=5), "u") == Done(5)
    error = ConfigUpdateErrorInfo("AssertionError", "bad")
    refused = ConfigUpdateResponse(RID, ConfigUpdateStatus.CONFIG_ERROR, error=error)
    with pytest.raises(ConfigUpdateError, match="AssertionError: bad"):
        config_update_outcome(RID, refused, "u")
    with pytest.raises(ConfigUpdateError, match="Busy"):
        config_update_outcome(RID, ConfigUpdateResponse(RID, ConfigUpdateStatus.BUSY), "u")
