"""The Signal channel in a fleet: one process holds the signal-cli event stream (one per account), the
others forward their sends to it. Real daemons and redis-server, the fake signal-cli daemon."""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest

from clawgate.agent.fleet.keys import partition_of
from tests.e2e.fleet.test_fleet_channels import spread, status
from tests.fakes.signal import BOT_NUMBER, FakeSignalCli, Person
from tests.fleet_support import PARTITIONS
from tests.waiting import wait_until


@pytest.fixture
def signal() -> Iterator[FakeSignalCli]:
    with FakeSignalCli(keepalive_seconds=2.0) as fake:
        yield fake


def test_signal_one_event_stream_for_the_fleet_and_chats_answered_from_every_process(
        fleet_factory, signal: FakeSignalCli) -> None:
    values: dict[str, Any] = {"enabled": True, "account": BOT_NUMBER, "base_url": signal.url, "dm_policy": "open",
                              "retry_base_seconds": 0.05}
    env = {f"CLAWGATE_CHANNELS__SIGNAL__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
           for k, v in values.items()}
    fleet, r, holder = spread(fleet_factory, env, "signal", channel="signal")
    other = next(p for p in fleet.procs if p is not holder)
    wait_until(signal.connected, "the holder's event stream", describe=fleet.logs)
    # people write privately (each chat its own session) until one chat is run by the standby process
    people: list[tuple[int, Person]] = []
    for i in range(24):
        person = signal.add_person(f"person{i}", number=f"+1555030{i:04d}")
        people.append((i, person))
        signal.write(person, f"question {i}")
        if fleet.holder(r, partition_of(f"signal:{person.uuid}", PARTITIONS)) == other.node:  # type: ignore[attr-defined]
            break
    else:
        raise AssertionError("no chat fell in the standby process's partitions")

    def answers(person: Person) -> list[str]:
        return [m.message for m in signal.sent_to(person.uuid)]

    wait_until(lambda: all(answers(p) for _, p in people), "an answer in every chat", describe=fleet.logs)
    for i, person in people:
        assert answers(person) == [f"echo: question {i}"]
    assert status(other)["fleetCalls"]["forwarded"] > 0
    assert signal.open_streams() == 1  # one connection for the account, held by one process
