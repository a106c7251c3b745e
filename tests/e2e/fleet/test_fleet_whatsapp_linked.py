"""WhatsApp's linked mode in a fleet: a linked device may be connected once (WhatsApp takes a second
connection of the same device for a stolen session), so each account's session is a singleton held by one
process; the others forward their sends to it. A SIGKILL of the holder moves the session within the lease.

Real daemons and redis-server; each daemon runs the fake of neonize's client (tests/fakes/whatsapp_linked),
all of them talking to the one fake WhatsApp here, which counts every account's linked sessions open at
once across the processes (`peak`: more than one is the failure).

What linked mode can promise across a kill, and what is tested: a message the holder had taken in (the
kit stored it) is answered once, by whichever process runs its session; a message sent while no process
holds the session is kept by WhatsApp for the device and answered once by the next holder. What it cannot:
a message whatsmeow had acknowledged but the kit had not stored when the process died is lost (neonize
acknowledges before the handler runs, docs/whatsapp.md "What a crash can lose"); the fake would deliver it
again, WhatsApp does not, so the test does not kill inside that window."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from clawgate.agent.fleet.keys import partition_of
from tests.conformance.platforms.whatsapp_linked import ROOT, WhatsAppLinkedHarness
from tests.e2e.fleet.test_fleet_channels import status
from tests.fakes.anthropic_api import FakeAnthropic, text
from tests.fakes.whatsapp.reading import plain_of
from tests.fakes.whatsapp_linked import FakeWhatsAppLinked
from tests.fleet_support import LEASE_SECONDS, PARTITIONS, Fleet
from tests.harness import DaemonProcess
from tests.waiting import wait_past, wait_until

WORK = "work"  # the second linked number beside the account "default" (channel "whatsapp")
CHANNELS = {"default": "whatsapp", WORK: f"whatsapp.{WORK}"}


@pytest.fixture
def wa() -> Iterator[WhatsAppLinkedHarness]:
    harness = WhatsAppLinkedHarness()
    harness.start()
    try:
        yield harness
    finally:
        harness.close()


def dm(user: str) -> str:
    return f"{user}@s.whatsapp.net"


def said(fake: FakeWhatsAppLinked, chat: str, account: str) -> list[str]:
    return [plain_of(s.text) for s in fake.to(chat, account)]


def session_lease(fleet: Fleet, r: "redis.Redis", account: str) -> str | None:
    """The process holding `account`'s linked session (its singleton lease), or None."""
    keys = [k for k in r.scan_iter(match=f"{fleet.prefix}:lease:s:whatsapp:*")
            if k.rsplit(":", 1)[1].partition(".")[2] == ("" if account == "default" else account)]
    assert len(keys) <= 1, keys  # one lease per linked account
    value = r.get(keys[0]) if keys else None
    return value.split("|")[0] if value else None


def channel_state(proc: DaemonProcess, account: str) -> str:
    return str(status(proc)["channelStates"].get(CHANNELS[account], {}).get("state"))


def start_unlinked(fleet_factory, wa: WhatsAppLinkedHarness, count: int = 2) -> tuple[Fleet, "redis.Redis"]:
    """`count` processes of a fleet with both accounts enabled, the partitions spread over them."""
    env = {**wa.env(dm_policy="open"), **{f"CLAWGATE_CHANNELS__WHATSAPP__ACCOUNTS__{a.upper()}__ENABLED": "true"
                                          for a in CHANNELS}}
    fleet: Fleet = fleet_factory(env)
    for _ in range(count):
        fleet.add()
    return fleet, fleet.spread(count)


def start(fleet_factory, wa: WhatsAppLinkedHarness, count: int) -> tuple[Fleet, "redis.Redis"]:
    """`count` processes with the partitions spread over them, both accounts' sessions held and running,
    every other process on standby for them."""
    fleet, r = start_unlinked(fleet_factory, wa, count)
    for account in CHANNELS:
        holder = fleet.by_node(wait_until(lambda a=account: session_lease(fleet, r, a), f"{account}'s session lease",
                                          describe=fleet.logs))
        wait_until(lambda a=account, h=holder: channel_state(h, a) == "running", f"{account} connected on its holder",
                   describe=fleet.logs)
        for proc in fleet.procs:
            if proc is not holder:
                wait_until(lambda a=account, p=proc: channel_state(p, a) == "standby", f"{account} on standby",
                           describe=fleet.logs)
    for account in CHANNELS:
        assert len(wa.fake.account(account).sessions) == 1
    return fleet, r


def forwarded(fleet: Fleet) -> int:
    return sum(status(p)["fleetCalls"]["forwarded"] for p in fleet.procs)


def test_one_linked_session_per_account_and_every_process_sends_through_it(
        fleet_factory, wa: WhatsAppLinkedHarness, fake_model: FakeAnthropic) -> None:
    fake = wa.fake
    fleet, r = start(fleet_factory, wa, 2)
    holder = session_lease(fleet, r, "default")
    # people write privately (each chat its own session) until one chat is run by a process without the session
    people: list[str] = []
    for n in range(40):
        person = f"1555031{n:04d}"
        people.append(person)
        fake.text(person, f"question {n}")
        if fleet.holder(r, partition_of(f"whatsapp:{dm(person)}", PARTITIONS)) != holder:
            break
    else:
        raise AssertionError("no chat fell in the partitions of the process without the session")
    wait_until(lambda: all(said(fake, dm(p), "default") for p in people), "an answer in every chat",
               describe=fleet.logs)
    for n, person in enumerate(people):
        assert said(fake, dm(person), "default") == [f"echo: question {n}"]
    assert forwarded(fleet) > 0  # the run elsewhere sent its answer (and its "typing…") through the holder

    # a cron job's result, delivered from the process running the job's session: added until one runs away
    # from the session's holder (a job's partition follows from its random id; the other process holds at
    # least one of the partitions, so one of 100 jobs misses the holder's all but surely)
    person = people[0]
    ran_elsewhere = False
    jobs = 0
    while not ran_elsewhere and jobs < 100:
        fake_model.enqueue_for(f"reminder {jobs}", text(f"Reminder {jobs} done"))
        added = json.loads(fleet.procs[0].cli("cron", "add", "--at", "+1s", "--message", f"reminder {jobs}",
                                              "--deliver", f"whatsapp:{dm(person)}", "--json").stdout)
        job_id = added.get("id") or added["job"]["id"]
        ran_elsewhere = fleet.holder(r, partition_of(f"cron:{job_id}", PARTITIONS)) != holder
        jobs += 1
    assert ran_elsewhere, "every cron job's session fell in the holder's partitions"
    wait_until(lambda: all(f"Reminder {j} done" in said(fake, dm(person), "default") for j in range(jobs)),
               "every cron result delivered", describe=fleet.logs)

    # the second account is its own session, held by itself; a run anywhere answers through its holder
    fake.text("15550320001", "to work", account=WORK)
    wait_until(lambda: said(fake, dm("15550320001"), WORK) == ["echo: to work"], "work's answer", describe=fleet.logs)
    wait_past(2.0)  # a reply sent twice would show by now
    results = said(fake, dm(person), "default")
    for j in range(jobs):
        assert results.count(f"Reminder {j} done") == 1, results
    assert not said(fake, dm("15550320001"), "default")
    for account in CHANNELS:
        found = fake.account(account)
        assert (found.peak, found.logins, len(found.sessions)) == (1, 1, 1), (account, found.peak, found.logins)

    # a clean stop hands the session on at once, and only once the stopping process let go of it
    stopping = fleet.by_node(holder or "")
    survivor = next(p for p in fleet.procs if p is not stopping)
    assert stopping.terminate() == 0
    wait_until(lambda: session_lease(fleet, r, "default") == survivor.node, "the other process holding the session",
               timeout=LEASE_SECONDS + 30, describe=fleet.logs)
    wait_until(lambda: channel_state(survivor, "default") == "running", "its session connected", describe=fleet.logs)
    fake.text(person, "still there?")
    wait_until(lambda: "echo: still there?" in said(fake, dm(person), "default"), "the answer after the handover",
               describe=fleet.logs)
    found = fake.account("default")
    assert (found.peak, found.logins, len(found.sessions)) == (1, 2, 1)


def test_a_killed_holder_hands_the_linked_session_on_and_messages_around_the_kill_are_answered_once(
        fleet_factory, wa: WhatsAppLinkedHarness, fake_model: FakeAnthropic) -> None:
    fake = wa.fake
    fleet, r = start(fleet_factory, wa, 3)
    killed = fleet.by_node(session_lease(fleet, r, "default") or "")
    work_holder = session_lease(fleet, r, WORK)
    work_logins = fake.account(WORK).logins
    before, during, later = "15550330001", "15550330002", "15550330003"
    taken = fake.text(before, "sent before the kill")
    wait_until(lambda: taken in fake.handled, "the holder took the message in", describe=fleet.logs)
    killed.kill()
    fake.text(during, "sent while no process holds the session")  # WhatsApp keeps it for the device
    new_holder = wait_until(lambda: (h := session_lease(fleet, r, "default")) and h != killed.node and h,
                            "another process holding the session", timeout=LEASE_SECONDS + 60, describe=fleet.logs)
    wait_until(lambda: channel_state(fleet.by_node(new_holder), "default") == "running",
               "the new holder connected", describe=fleet.logs)
    wait_until(lambda: said(fake, dm(before), "default") and said(fake, dm(during), "default"),
               "both messages answered", timeout=LEASE_SECONDS + 90, describe=fleet.logs)
    fake.text(later, "sent after the move")
    wait_until(lambda: said(fake, dm(later), "default"), "the answer after the move", describe=fleet.logs)
    fake.text("15550330004", "to work after the kill", account=WORK)
    wait_until(lambda: said(fake, dm("15550330004"), WORK), "work's answer", timeout=LEASE_SECONDS + 90,
               describe=fleet.logs)
    wait_past(3.0)  # a copy delivered again, or a reply sent twice, would show by now
    assert said(fake, dm(before), "default") == ["echo: sent before the kill"]
    assert said(fake, dm(during), "default") == ["echo: sent while no process holds the session"]
    assert said(fake, dm(later), "default") == ["echo: sent after the move"]
    assert said(fake, dm("15550330004"), WORK) == ["echo: to work after the kill"]
    default = fake.account("default")
    assert (default.peak, default.logins, len(default.sessions)) == (1, 2, 1)  # never two at once, one now
    work = fake.account(WORK)
    assert work.peak == 1 and len(work.sessions) == 1
    if work_holder != killed.node:  # held independently: the other account's session did not move
        assert session_lease(fleet, r, WORK) == work_holder and work.logins == work_logins


def channel_row(proc: DaemonProcess, account: str) -> dict[str, Any]:
    return dict(status(proc)["channelStates"].get(CHANNELS[account], {}))


def test_linked_while_the_fleet_runs_one_process_connects_and_a_kill_still_moves_the_session(
        fleet_factory, wa: WhatsAppLinkedHarness, fake_model: FakeAnthropic) -> None:
    """Alone, an unlinked device fails the channel until linking restarts it. In a fleet the process holding
    the account's lease keeps retrying instead (every other process stays on standby), so a device linked
    later, from any process, is connected once by the holder, and a kill still hands it on."""
    fake = wa.fake
    fake.account("default").linked = False
    fake.account(WORK)  # the second number exists, linked: it runs meanwhile
    fleet, r = start_unlinked(fleet_factory, wa)
    waiting = fleet.by_node(session_lease(fleet, r, "default") or "")
    other = next(p for p in fleet.procs if p is not waiting)
    row = wait_until(lambda: (found := channel_row(waiting, "default")).get("state") == "retrying" and found,
                     "the holder waiting for the link", describe=fleet.logs)
    assert "clawgate channels login whatsapp" in row["reason"], row
    assert channel_state(other, "default") == "standby" and fake.account("default").logins == 0
    login = subprocess.Popen([sys.executable, "-m", "clawgate.gateway.cli", "channels", "login", "whatsapp"],
                             env=other.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: fake.account("default").conns, "the login connected", describe=fleet.logs)
        fake.scan("default")
        out, err = login.communicate(timeout=120)
    finally:
        login.kill()
    assert login.returncode == 0 and "linked as" in out, err
    wait_until(lambda: channel_state(waiting, "default") == "running", "the holder connected once linked",
               timeout=LEASE_SECONDS + 90, describe=fleet.logs)
    fake.text("15550340001", "hello after linking")
    wait_until(lambda: said(fake, dm("15550340001"), "default"), "the answer", describe=fleet.logs)
    waiting.kill()
    wait_until(lambda: session_lease(fleet, r, "default") == other.node, "the other process holding the session",
               timeout=LEASE_SECONDS + 60, describe=fleet.logs)
    wait_until(lambda: channel_state(other, "default") == "running", "its session connected", describe=fleet.logs)
    fake.text("15550340002", "hello after the kill")
    wait_until(lambda: said(fake, dm("15550340002"), "default"), "the answer after the kill", describe=fleet.logs)
    wait_past(2.0)
    assert said(fake, dm("15550340001"), "default") == ["echo: hello after linking"]
    assert said(fake, dm("15550340002"), "default") == ["echo: hello after the kill"]
    found = fake.account("default")
    assert (found.peak, found.logins, len(found.sessions)) == (1, 2, 1)
    fake.log_out("default")  # removed from the phone: the holder keeps the account, waiting for a new link
    row = wait_until(lambda: (now := channel_row(other, "default")).get("state") == "retrying" and now,
                     "the holder waiting for a new link", describe=fleet.logs)
    assert "logged" in row["reason"] and "channels login whatsapp" in row["reason"], row
    wait_until(lambda: not found.sessions, "the logged-out session closed", describe=fleet.logs)
    assert session_lease(fleet, r, "default") == other.node and found.peak == 1
