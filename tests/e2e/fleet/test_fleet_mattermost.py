"""Mattermost in a fleet: one WebSocket per bot account across the fleet, held by the process with the
account's singleton lease; the other process runs the turns of its partitions and sends through the
holder; SIGKILL of the holder moves the socket, and the posts made while no socket was open are read
back by the next holder. Real daemons, the fake Mattermost server (REST v4 and its WebSocket), a real
redis-server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from clawgate.agent.fleet.keys import partition_of
from tests.e2e.fleet.test_fleet_channels import spread, status
from tests.fakes.mattermost import BOT_TOKEN, FakeMattermost, User
from tests.fleet_support import LEASE_SECONDS, PARTITIONS
from tests.waiting import wait_until

PEOPLE = 8


@pytest.fixture
def mattermost() -> Iterator[FakeMattermost]:
    with FakeMattermost() as fake:
        yield fake


def open_sockets(fake: FakeMattermost) -> int:
    """WebSockets the fake server has open right now, fleet-wide."""
    with fake._lock:
        return len(fake._sockets)


def answers(fake: FakeMattermost, channel: str) -> list[str]:
    return [p.message for p in fake.sent_to(channel) if not p.message.startswith(("⚙️", "⏳"))]


def env_for(fake: FakeMattermost, owners: list[User]) -> dict[str, str]:
    values: dict[str, Any] = {"enabled": True, "base_url": fake.url, "token": BOT_TOKEN,
                              "owner": [u.id for u in owners], "retry_base_seconds": 0.05}
    return {f"CLAWGATE_CHANNELS__MATTERMOST__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
            for k, v in values.items()}


def test_one_websocket_for_the_fleet_replies_from_every_process_and_failover_on_a_kill(
        fleet_factory, mattermost: FakeMattermost) -> None:
    people = [mattermost.add_user(f"person{i}") for i in range(PEOPLE)]
    dms = {person.id: mattermost.dm_channel(person) for person in people}
    fleet, r, holder = spread(fleet_factory, env_for(mattermost, people), "mattermost", channel="mattermost")
    other = next(p for p in fleet.procs if p is not holder)
    wait_until(lambda: open_sockets(mattermost) == 1, "the holder's WebSocket", describe=fleet.logs)
    on_other = [dm for dm in dms.values()
                if fleet.holder(r, partition_of(f"mattermost:{dm}", PARTITIONS)) == other.node]  # type: ignore[attr-defined]
    assert on_other, "some of the chats are run by the process without the socket"

    for person in people:
        mattermost.write(person, dms[person.id], f"{person.username} before")
    wait_until(lambda: all(answers(mattermost, dm) for dm in dms.values()), "an answer in every DM",
               describe=fleet.logs)
    for person in people:
        assert answers(mattermost, dms[person.id]) == [f"echo: {person.username} before"]
    for dm in on_other:  # the session (and so the partition) is the one computed above
        assert (fleet.home / "state/sessions" / f"mattermost%3A{dm}.jsonl").exists()
    assert status(other)["channelStates"]["mattermost"]["state"] == "standby"
    assert status(other)["fleetCalls"]["forwarded"] > 0 and status(holder)["fleetCalls"]["served"] > 0
    assert open_sockets(mattermost) == 1  # once per bot in the whole fleet

    holder.kill()  # SIGKILL: the socket drops, the lease runs out
    for person in people:  # no socket open anywhere: read back by the next holder
        mattermost.write(person, dms[person.id], f"{person.username} during")
    lease = f"{fleet.prefix}:lease:s:mattermost:*"
    wait_until(lambda: [(r.get(k) or "").split("|")[0] for k in r.scan_iter(match=lease)] == [other.node],  # type: ignore[attr-defined]
               "the survivor holding the connection lease", timeout=LEASE_SECONDS + 60, describe=fleet.logs)
    wait_until(lambda: open_sockets(mattermost) == 1, "the survivor's WebSocket", describe=fleet.logs)
    for person in people:
        mattermost.write(person, dms[person.id], f"{person.username} after")
    wait_until(lambda: all(len(answers(mattermost, dm)) >= 3 for dm in dms.values()), "three answers in every DM",
               describe=lambda: "\n".join(f"{dm}: {answers(mattermost, dm)}" for dm in dms.values()) + fleet.logs())
    for person in people:
        assert answers(mattermost, dms[person.id]) == [f"echo: {person.username} {when}"
                                                       for when in ("before", "during", "after")]
    assert open_sockets(mattermost) == 1
    assert status(other)["channelStates"]["mattermost"]["state"] == "running"
