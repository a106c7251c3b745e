"""Two Discord bot accounts in a fleet: each account's Gateway connection has a singleton lease of its own,
so each bot holds one session somewhere in the fleet, the other process is on standby for it, and both bots
answer. Real daemons, real discord.py against two fake Discord servers, a real redis-server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.fleet.test_fleet_channels import discord_env, live_sessions, replies, status
from tests.fakes.anthropic_api import FakeAnthropic, text
from tests.fakes.discord_api import FakeDiscord
from tests.waiting import wait_until


@pytest.fixture
def two_discords() -> Iterator[tuple[FakeDiscord, FakeDiscord]]:
    with FakeDiscord() as first, FakeDiscord() as second:
        yield first, second


def test_each_account_holds_its_own_connection_in_a_fleet(fleet_factory, two_discords,
                                                          fake_model: FakeAnthropic) -> None:
    first, second = two_discords
    fleet = fleet_factory({**discord_env(first), "CLAWGATE_CHANNELS__DISCORD__ACCOUNTS__SECOND__TOKEN": second.token,
                           "CLAWGATE_CHANNELS__DISCORD__ACCOUNTS__SECOND__BASE_URL": second.base_url})
    for _ in range(2):
        fleet.add()
    r = fleet.spread(2)
    leases = wait_until(lambda: (found := sorted(r.scan_iter(match=f"{fleet.prefix}:lease:s:discord:*")))
                        and len(found) == 2 and found, "a connection lease per account", describe=fleet.logs)
    assert len(set(leases)) == 2

    def one_holder_each() -> bool:
        states = [status(proc)["channelStates"] for proc in fleet.procs]
        return all(sorted(s[name]["state"] for s in states) == ["running", "standby"]
                   for name in ("discord", "discord.second"))
    wait_until(one_holder_each, "each account running in one process, on standby in the other", describe=fleet.logs)
    wait_until(lambda: first.connected() and second.connected(), "both bots' Gateway sessions", describe=fleet.logs)
    assert live_sessions(first) == 1 and live_sessions(second) == 1  # once per bot in the whole fleet

    fake_model.enqueue_for("hi first", text("first bot here"))
    fake_model.enqueue_for("hi second", text("second bot here"))
    first.inject_guild_message("hi first", mention_bot=True)
    second.inject_guild_message("hi second", mention_bot=True)
    wait_until(lambda: replies(first, first.channel_id) == ["first bot here"], "the first bot's answer",
               describe=fleet.logs)
    wait_until(lambda: replies(second, second.channel_id) == ["second bot here"], "the second bot's answer",
               describe=fleet.logs)
