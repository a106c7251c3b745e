"""Cron jobs deliver to Matrix rooms: both room id forms are accepted, anything else is one line."""

from __future__ import annotations

import pytest

from clawgate.agent.triggers.jobs import CronError, parse_deliver, resolve_deliver


def test_matrix_room_ids_are_delivery_targets() -> None:
    assert parse_deliver("matrix:!abc123:example.org") == "matrix:!abc123:example.org"
    assert parse_deliver("Matrix:!Qx-9_opaqueV12") == "matrix:!Qx-9_opaqueV12"  # room version 12: no server part
    assert resolve_deliver("matrix:!abc123:example.org", "cron:x") == {"channel": "matrix",
                                                                       "chat_id": "!abc123:example.org"}


@pytest.mark.parametrize("bad", ["matrix:", "matrix:@user:example.org", "matrix:#alias:example.org", "matrix:!a b"])
def test_a_matrix_target_that_is_not_a_room_id_is_refused(bad: str) -> None:
    with pytest.raises(CronError) as info:
        parse_deliver(bad)
    assert "a Matrix room id looks like !abc123:example.org" in info.value.message
