"""Microsoft Teams, Google Chat, Feishu and DingTalk in a fleet: each account's connection (Feishu's long
connection, DingTalk's Stream WebSocket) is held by one process, the other forwards its sends to it, and a
SIGKILL of the holder moves it: messages sent just before and while no process holds it are answered once
each (Feishu and DingTalk deliver again what was not acknowledged, on the next connection). Teams and Google
Chat POST to an HTTP endpoint, and every process listens on it: a SIGKILL of one loses nothing, the POST
the dead one no longer answers is sent again (as the fakes do) and taken by another
(docs/fleet.md, "HTTP endpoints").
Real daemons, the real SDKs against the fakes in tests/fakes/, a real redis-server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from tempfile import mkdtemp
from typing import Any, Callable

import pytest
import redis

from clawgate.agent.fleet.keys import partition_of
from tests.conformance.platforms.feishu import markdown_of
from tests.conformance.platforms.googlechat import _buttons, _param
from tests.e2e.fleet.test_fleet_channels import spread, status
from tests.fakes.dingtalk import CLIENT_SECRET, FakeDingTalk
from tests.fakes.feishu import APP_ID as FEISHU_APP_ID
from tests.fakes.feishu import APP_SECRET as FEISHU_APP_SECRET
from tests.fakes.feishu import FakeFeishu
from tests.fakes.googlechat import PROJECT_NUMBER, FakeGoogleChat
from tests.fakes.googlechat import plain_of as chat_plain
from tests.fakes.teams import FakeTeams
from tests.fakes.teams import plain_of as teams_plain
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fleet_support import LEASE_SECONDS, PARTITIONS, Fleet
from tests.harness import DaemonProcess, free_port
from tests.waiting import wait_past, wait_until

STATUS = ("⚙️", "⏳")


def section(channel: str, values: dict[str, Any]) -> dict[str, str]:
    prefix = f"CLAWGATE_CHANNELS__{channel.upper()}__"
    return {prefix + k.upper(): v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}


class World:
    """One platform's fake, as the test sees it: people writing, the bot's answers, its open connections."""

    name = ""
    listens = False  # an HTTP endpoint the platform POSTs to (else a connection the daemon opens)

    def env(self) -> dict[str, str]:
        raise NotImplementedError

    def person(self, n: int) -> str:
        """A new person's private chat with the bot (its id as the session key has it)."""
        raise NotImplementedError

    def write(self, chat: str, text: str) -> None:
        raise NotImplementedError

    def answers(self, chat: str) -> list[str]:
        raise NotImplementedError

    def connections(self) -> int:
        """Open connections to the platform (the long-connection channels)."""
        raise NotImplementedError

    # the HTTP-endpoint channels
    def owner(self, chat: str) -> dict[str, str]:
        """Settings making the person of `chat` the bot's owner."""
        raise NotImplementedError

    def listen_on(self, port: int) -> dict[str, str]:
        """A process's own setting of the endpoint's port; the platform POSTs there from now on."""
        raise NotImplementedError

    def approve(self, chat: str) -> None:
        """The person of `chat` presses Approve on the prompt there (once it was sent)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class TeamsWorld(World):
    name, listens = "teams", True

    def __init__(self) -> None:
        self.fake = FakeTeams().start()
        self.people: dict[str, Any] = {}

    def env(self) -> dict[str, str]:
        port = free_port()  # every process is told the same port; only the connection's holder listens on it
        self.fake.endpoint = f"http://127.0.0.1:{port}/api/messages"
        return section("teams", {"app_id": self.fake.app_id, "app_password": self.fake.app_password,
                                 "listen_port": port, "openid_metadata_url": self.fake.openid_url,
                                 "token_url": self.fake.token_url, "dm_policy": "open", "retry_base_seconds": 0.05})

    def person(self, n: int) -> str:
        person = self.fake.add_person(f"person{n}")
        self.people[person.personal_chat] = person
        return str(person.personal_chat)

    def write(self, chat: str, text: str) -> None:
        self.fake.say(self.people[chat], chat, text)

    def answers(self, chat: str) -> list[str]:
        return [teams_plain(s.text) for s in self.fake.sent_to(chat)
                if not s.cards and not teams_plain(s.versions[0]).startswith(STATUS)]

    def owner(self, chat: str) -> dict[str, str]:
        return section("teams", {"owner": [self.people[chat].aad_object_id]})

    def listen_on(self, port: int) -> dict[str, str]:
        self.fake.endpoint = f"http://127.0.0.1:{port}/api/messages"
        return section("teams", {"listen_port": port})

    def approve(self, chat: str) -> None:
        prompt = wait_until(lambda: next((s for s in self.fake.sent_to(chat) if s.cards), None), "the approval card")
        approve = next(a["data"] for a in prompt.cards[0]["actions"] if a["title"] == "Approve")
        self.fake.say(self.people[chat], chat, "", value=approve, reply_to=prompt.id)

    def close(self) -> None:
        self.fake.stop()


class GoogleChatWorld(World):
    name, listens = "googlechat", True

    def __init__(self) -> None:
        self.fake = FakeGoogleChat()
        self.fake.start()
        self.people: dict[str, Any] = {}
        self.folder = Path(mkdtemp(prefix="googlechat-key-"))

    def env(self) -> dict[str, str]:
        port = free_port()
        self.fake.endpoint_url = f"http://127.0.0.1:{port}/googlechat/events"
        key = self.folder / "key.json"
        key.write_text(json.dumps(self.fake.key()))
        return section("googlechat", {"credentials_file": str(key), "audience": PROJECT_NUMBER,
                                      "base_url": self.fake.base_url, "certs_url": self.fake.certs_url,
                                      "listen_port": port, "dm_policy": "open", "retry_base_seconds": 0.05})

    def person(self, n: int) -> str:
        user = self.fake.add_user(f"Person {n}")
        self.people[user.dm] = user
        return str(user.dm)

    def write(self, chat: str, text: str) -> None:
        self.fake.write(self.people[chat], chat, text)

    def answers(self, chat: str) -> list[str]:
        return [chat_plain(s.text) for s in self.fake.sent_to(chat)
                if not s.text.startswith(("🔐", *STATUS)) and not s.viewer]

    def owner(self, chat: str) -> dict[str, str]:
        return section("googlechat", {"owner": [self.people[chat].name.removeprefix("users/")]})

    def listen_on(self, port: int) -> dict[str, str]:
        self.fake.endpoint_url = f"http://127.0.0.1:{port}/googlechat/events"
        return section("googlechat", {"listen_port": port})

    def approve(self, chat: str) -> None:
        def button() -> tuple[Any, dict[str, Any]] | None:
            return next(((sent, b) for sent in self.fake.sent_to(chat) for b in _buttons(sent)
                         if _param(b, "approve") == "true"), None)
        sent, approve = wait_until(button, "the approval card")
        self.fake.click(self.people[chat], sent, approve)

    def close(self) -> None:
        self.fake.stop()


class FeishuWorld(World):
    name = "feishu"

    def __init__(self) -> None:
        self.fake = FakeFeishu().__enter__()
        self.people: dict[str, Any] = {}

    def env(self) -> dict[str, str]:
        return section("feishu", {"enabled": True, "domain": self.fake.url, "app_id": FEISHU_APP_ID,
                                  "app_secret": FEISHU_APP_SECRET, "dm_policy": "open", "retry_base_seconds": 0.05})

    def person(self, n: int) -> str:
        user = self.fake.add_user(f"person{n}")
        chat = self.fake.p2p_chat(user)
        self.people[chat] = user
        return chat

    def write(self, chat: str, text: str) -> None:
        self.fake.write(self.people[chat], chat, text)

    def answers(self, chat: str) -> list[str]:
        return [markdown_of(m) for m in self.fake.sent_to(chat)
                if m.msg_type == "post" and not markdown_of(m).startswith(STATUS)]

    def connections(self) -> int:
        with self.fake._lock:
            return len(self.fake._sockets)

    def close(self) -> None:
        self.fake.__exit__(None, None, None)


class DingTalkWorld(World):
    name = "dingtalk"

    def __init__(self) -> None:
        self.fake = FakeDingTalk().__enter__()
        self.people: dict[str, Any] = {}

    def env(self) -> dict[str, str]:
        return section("dingtalk", {"enabled": True, "base_url": self.fake.url, "client_id": self.fake.client_id,
                                    "client_secret": CLIENT_SECRET, "dm_policy": "open", "retry_base_seconds": 0.05})

    def person(self, n: int) -> str:
        person = self.fake.add_person(f"person{n}")
        self.people[person.staff_id] = person
        return str(person.staff_id)

    def write(self, chat: str, text: str) -> None:
        self.fake.write(self.people[chat], text)

    def answers(self, chat: str) -> list[str]:
        return [s.text for s in self.fake.sent_to(chat) if s.via != "card" and not s.text.startswith(STATUS)]

    def connections(self) -> int:
        with self.fake._lock:
            return len(self.fake._sockets)

    def close(self) -> None:
        self.fake.__exit__(None, None, None)


WORLDS: dict[str, Callable[[], World]] = {"teams": TeamsWorld, "googlechat": GoogleChatWorld,
                                           "feishu": FeishuWorld, "dingtalk": DingTalkWorld}


def make_world(name: str) -> Iterator[World]:
    made = WORLDS[name]()
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(params=["feishu", "dingtalk"])
def connected_world(request: pytest.FixtureRequest) -> Iterator[World]:
    yield from make_world(request.param)


@pytest.fixture(params=["teams", "googlechat"])
def listening_world(request: pytest.FixtureRequest) -> Iterator[World]:
    yield from make_world(request.param)


def lease_of(fleet: Fleet, r: "redis.Redis", channel: str) -> str | None:
    keys = list(r.scan_iter(match=f"{fleet.prefix}:lease:s:{channel}:*"))
    assert len(keys) <= 1, keys  # one account, one connection lease
    value = r.get(keys[0]) if keys else None
    return value.split("|")[0] if value else None


def chats_on_every_process(world: World, fleet: Fleet, r: "redis.Redis") -> list[str]:
    """People write privately (each chat its own session) until every process runs one of the chats; each
    is answered once."""
    nodes = {p.node for p in fleet.procs}  # type: ignore[attr-defined]
    share = PARTITIONS // len(nodes)  # each takes its share once the workers that joined later have caught up
    wait_until(lambda: all(list(fleet.holders(r).values()).count(node) == share for node in nodes),
               f"{share} partitions held by each process", describe=fleet.logs)
    chats: list[str] = []
    for n in range(48):
        chat = world.person(n)
        chats.append(chat)
        world.write(chat, f"question {n}")
        nodes.discard(fleet.holder(r, partition_of(f"{world.name}:{chat}", PARTITIONS)))
        if not nodes:
            break
    else:
        raise AssertionError(f"no chat fell in the partitions of {nodes}")
    wait_until(lambda: all(world.answers(c) for c in chats), "an answer in every chat", describe=fleet.logs)
    for n, chat in enumerate(chats):
        assert world.answers(chat) == [f"echo: question {n}"]
    return chats


def answered_once_around_a_kill(world: World, fleet: Fleet, killed: DaemonProcess,
                                moved: Callable[[], None]) -> None:
    """One message just before the SIGKILL (taken in by the killed process or not: answered once either way),
    one right after it; `moved` waits for the fleet to have taken over what the killed process held."""
    before, during = world.person(100), world.person(101)
    world.write(before, "sent before the kill")
    killed.kill()
    world.write(during, "sent right after the kill")
    moved()
    wait_until(lambda: world.answers(before) and world.answers(during), "both messages answered",
               timeout=LEASE_SECONDS + 90, describe=fleet.logs)
    wait_past(3.0)  # a copy delivered again, or a reply sent twice, would show by now
    assert world.answers(before) == ["echo: sent before the kill"]
    assert world.answers(during) == ["echo: sent right after the kill"]


def test_one_connection_per_account_moves_on_a_kill_and_each_message_is_answered_once(
        fleet_factory, connected_world: World) -> None:
    world = connected_world
    fleet, r, _ = spread(fleet_factory, world.env(), world.name, channel=world.name)
    wait_until(lambda: world.connections() == 1, "the holder's connection", describe=fleet.logs)
    chats_on_every_process(world, fleet, r)
    # the turns run where the connection is not went out through it (on a loaded machine the lease may
    # have moved meanwhile: whoever holds it served them)
    assert sum(status(p)["fleetCalls"]["forwarded"] for p in fleet.procs) > 0
    holder = fleet.by_node(wait_until(lambda: lease_of(fleet, r, world.name), "the connection's holder"))
    other = next(p for p in fleet.procs if p is not holder)

    def moved() -> None:
        wait_until(lambda: lease_of(fleet, r, world.name) == other.node,  # type: ignore[attr-defined]
                   "the standby process holding the connection", timeout=LEASE_SECONDS + 60, describe=fleet.logs)
        wait_until(lambda: status(other)["channelStates"][world.name].get("state") == "running",
                   "the new holder's channel running", describe=fleet.logs)

    answered_once_around_a_kill(world, fleet, holder, moved)
    assert world.connections() == 1  # the dead holder's connection is gone, the new one alone


def test_every_process_listens_and_a_kill_loses_nothing(fleet_factory, listening_world: World) -> None:
    """Teams and Google Chat POST to an HTTP endpoint: every process of the fleet listens on it (one host:
    the same port, shared by the kernel) and sends its own replies; nothing is held, nothing moves."""
    world = listening_world
    fleet: Fleet = fleet_factory(world.env())
    for _ in range(2):
        fleet.add()
    r = fleet.spread(2)
    for proc in fleet.procs:
        wait_until(lambda: status(proc)["channelStates"][world.name].get("state") == "running",
                   f"{world.name} listening on {proc.node}", describe=fleet.logs)  # type: ignore[attr-defined]
    chats_on_every_process(world, fleet, r)
    assert not list(r.scan_iter(match=f"{fleet.prefix}:lease:s:{world.name}:*"))  # no connection lease
    survivor, killed = fleet.procs
    assert status(survivor)["fleetCalls"]["forwarded"] == 0  # each process sent its own replies
    listening_since = status(survivor)["channelStates"][world.name]["since"]

    def moved() -> None:  # the killed process's partitions: their messages wait in Redis for a new holder
        wait_until(lambda: set(fleet.holders(r).values()) == {survivor.node},  # type: ignore[attr-defined]
                   "the survivor holding every partition", timeout=LEASE_SECONDS + 60, describe=fleet.logs)

    answered_once_around_a_kill(world, fleet, killed, moved)
    # the survivor's listener took the POSTs the dead one no longer could, without reconnecting
    assert status(survivor)["channelStates"][world.name]["since"] == listening_since


def test_an_approval_asked_on_one_process_is_pressed_on_another(fleet_factory, listening_world: World,
                                                                fake_model: FakeAnthropic) -> None:
    """The run's process sends its prompt itself; the press reaches another process (each listens on a port
    of its own here, so the test says which), which takes the owner's answer and relays it to the run."""
    world = listening_world
    chat = world.person(0)
    fleet: Fleet = fleet_factory({**world.env(), **world.owner(chat)})
    ports = [free_port() for _ in range(2)]
    for port in ports:
        fleet.add(env=world.listen_on(port))
    r = fleet.spread(2)
    for proc in fleet.procs:
        wait_until(lambda: status(proc)["channelStates"][world.name].get("state") == "running",
                   f"{world.name} listening on {proc.node}", describe=fleet.logs)  # type: ignore[attr-defined]
    runs_on = fleet.holder(r, partition_of(f"{world.name}:{chat}", PARTITIONS))
    elsewhere = next(i for i, p in enumerate(fleet.procs) if p.node != runs_on)  # type: ignore[attr-defined]
    world.listen_on(ports[elsewhere])  # the message and the press arrive at the process not running the turn
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "approved.txt"]}), text("Created approved.txt."))
    world.write(chat, "make a file")
    world.approve(chat)
    wait_until(lambda: "Created approved.txt." in world.answers(chat), "the approved run's answer",
               describe=fleet.logs)
    assert (fleet.home / "workspace/approved.txt").exists()
    assert all(status(p)["fleetCalls"]["forwarded"] == 0 for p in fleet.procs)  # each sent its own
