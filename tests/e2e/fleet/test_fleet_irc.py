"""IRC in a fleet: one connection (one bot nick on the network) per `[channels.irc]` account across the
fleet, held by the process with the account's singleton lease; SIGKILL of the holder moves it to the other
process within the lease. Real daemons on a real redis-server, a real IRC network (InspIRCd + Anope,
tests/irc_server.py) and the tests' own IRC client as the owner."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.fleet.test_fleet_channels import spread, status
from tests.e2e.test_irc_e2e import BOT, BOT_PASSWORD, OWNER, OWNER_PASSWORD, section
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fleet_support import LEASE_SECONDS
from tests.irc_server import IrcNetwork, IrcUser
from tests.waiting import wait_until


@pytest.fixture
def network() -> Iterator[IrcNetwork]:
    net = IrcNetwork().start()
    try:
        net.register(BOT, BOT_PASSWORD)
        net.register(OWNER, OWNER_PASSWORD)
        yield net
    finally:
        net.stop()


def bot_connections(network: IrcNetwork) -> tuple[int, int]:
    """(now, most ever at once): the bot's connections as services logged every connect and disconnect, in
    order. Complete, unlike polling: a second connection of the account (which would come in as `clawbot_`)
    counts however briefly it lasted."""
    now = most = 0
    for log in sorted((network.root / "logs").glob("services.log*")):
        for line in log.read_text(errors="replace").splitlines():
            who = line.split("USERS: ", 1)[1].split("!", 1)[0] if "USERS: " in line else ""
            if who.startswith(BOT):
                now += " connected to the network" in line
                now -= " disconnected from the network" in line
                most = max(most, now)
    return now, most


def test_one_connection_for_the_fleet_and_it_moves_when_its_holder_is_killed(
        fleet_factory, network: IrcNetwork, fake_model: FakeAnthropic) -> None:
    env = section(enabled=True, host="127.0.0.1", port=network.port, tls=False, nick=BOT, sasl_password=BOT_PASSWORD,
                  owner=[OWNER], retry_base_seconds=0.05)
    with IrcUser(network, OWNER, OWNER_PASSWORD) as boss:
        fleet, r, holder = spread(fleet_factory, env, "irc", channel="irc")
        other = next(p for p in fleet.procs if p is not holder)
        wait_until(lambda: bot_connections(network)[0] == 1, "the holder's bot on the network", describe=fleet.logs)
        boss.say(BOT, "before the kill")
        wait_until(lambda: boss.received(BOT) == ["echo: before the kill"], "the DM answered", describe=fleet.logs)
        assert status(other)["channelStates"]["irc"]["state"] == "standby"

        holder.kill()  # SIGKILL: the kernel closes the socket, the lease runs out
        lease = f"{fleet.prefix}:lease:s:irc:*"
        wait_until(lambda: [(r.get(k) or "").split("|")[0] for k in r.scan_iter(match=lease)] == [other.node],  # type: ignore[attr-defined]
                   "the survivor holding the connection lease", timeout=LEASE_SECONDS + 60, describe=fleet.logs)
        wait_until(lambda: status(other)["channelStates"]["irc"]["state"] == "running"
                   and bot_connections(network)[0] == 1, "the survivor's bot on the network", describe=fleet.logs)
        boss.say(BOT, "after the kill")
        wait_until(lambda: len(boss.received(BOT)) >= 2, "the DM after the kill answered", describe=fleet.logs)
        assert boss.received(BOT) == ["echo: before the kill", "echo: after the kill"]
        assert len(fake_model.requests) == 2  # each DM ran once, none again on the survivor
        assert bot_connections(network) == (1, 1), network.log()  # never two bot connections at once
