"""The Microsoft Teams channel end to end: the real daemon process against a fake Microsoft (tests/fakes/teams:
OpenID metadata and signing keys, the token service, the Bot Connector), activities signed by the fake.

What the conformance suite does not cover: every kind of bad token refused with 401 and nothing of the body
logged, a hostile serviceUrl never called, a channel post answered in its thread (mention only), identity
by Entra object id (a display name copying the owner's is a stranger), Adaptive Card approvals in a group
(a forged press and a guest's press refused), a cron result delivered to a Teams chat, two bots at once, a
refused secret, and `doctor`.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any, Callable, Iterator

import pytest
from aiohttp import web

from tests.e2e.test_doctor import run_doctor
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fakes.teams import APP_ID, APP_PASSWORD, FakeTeams, Person, Sent, plain_of
from tests.harness import DaemonProcess, free_port
from tests.waiting import wait_past, wait_until

STATUS = ("⚙️", "⏳")


@pytest.fixture
def teams() -> Iterator[FakeTeams]:
    fake = FakeTeams().start()
    try:
        yield fake
    finally:
        fake.stop()


def section(**values: Any) -> dict[str, str]:
    return {f"CLAWGATE_CHANNELS__TEAMS__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
            for k, v in values.items()}


def settings_for(fake: FakeTeams, **values: Any) -> dict[str, Any]:
    port = free_port()
    fake.endpoint = f"http://127.0.0.1:{port}/api/messages"
    return {"app_id": fake.app_id, "app_password": fake.app_password, "listen_port": port,
            "openid_metadata_url": fake.openid_url, "token_url": fake.token_url, "retry_base_seconds": 0.05, **values}


@pytest.fixture
def owner(teams: FakeTeams) -> Person:
    return teams.add_person("owner")


@pytest.fixture
def teams_daemon(daemon_factory: Callable[..., DaemonProcess], teams: FakeTeams,
                 owner: Person) -> Callable[..., DaemonProcess]:
    def make(**values: Any) -> DaemonProcess:
        daemon = daemon_factory(section(**settings_for(teams, owner=[owner.aad_object_id], **values)))
        wait_until(lambda: _state(daemon) == "running", "the Teams channel running", describe=daemon.log_text)
        return daemon

    return make


def _state(daemon: DaemonProcess, name: str = "teams") -> str:
    rows = json.loads(daemon.cli("channels", "--json").stdout)
    return str(next((r for r in rows if r["name"] == name), {}).get("state"))


def said(fake: FakeTeams, chat: str) -> list[str]:
    return [plain_of(s.text) for s in fake.sent_to(chat) if not s.cards and not plain_of(s.versions[0]).startswith(STATUS)]


def test_a_personal_chat_is_answered_with_typing_and_doctor_logs_in(teams_daemon, teams: FakeTeams, owner: Person,
                                                                     fake_model: FakeAnthropic) -> None:
    daemon = teams_daemon()
    fake_model.enqueue(text("Hello **there**, run `ls` & <b>see</b>"))
    teams.say(owner, owner.personal_chat, "hi bot")
    wait_until(lambda: said(teams, owner.personal_chat), "the reply", describe=daemon.log_text)
    [reply] = [s for s in teams.sent_to(owner.personal_chat) if not plain_of(s.versions[0]).startswith(STATUS)]
    assert reply.body["textFormat"] == "xml"
    assert reply.text == "<p>Hello <strong>there</strong>, run <code>ls</code> &amp; &lt;b&gt;see&lt;/b&gt;</p>"
    assert owner.personal_chat in teams.typing
    assert "hi bot" in json.dumps(fake_model.requests[0]["messages"])
    assert teams.token_requests == 1  # the token is reused until it nearly expires
    code, checks, _ = run_doctor(daemon)
    assert checks["teams"]["status"] == "ok" and f"app {APP_ID}" in checks["teams"]["detail"], checks["teams"]


def test_a_channel_post_is_mention_only_and_answered_in_its_thread(teams_daemon, teams: FakeTeams, owner: Person,
                                                                   fake_model: FakeAnthropic) -> None:
    teams_daemon()
    channel = teams.add_conversation("channel")
    teams.say(owner, channel, "talking among ourselves")
    post = teams.say(owner, channel, "what is new?", mention=True)
    wait_until(lambda: said(teams, channel), "the answer in the channel")
    assert said(teams, channel) == ["echo: what is new?"]  # the <at> mention is gone from what the model read
    assert [s.conversation for s in teams.sent_to(channel)] == [f"{channel};messageid={post}"]  # in the post's thread
    assert "among ourselves" not in json.dumps(fake_model.requests)
    teams.say(owner, f"{channel};messageid={post}", "and then?", mention=True)
    wait_until(lambda: len(said(teams, channel)) == 2, "the answer in the thread")
    assert {s.conversation for s in teams.sent_to(channel)} == {f"{channel};messageid={post}"}
    assert "what is new?" in json.dumps(fake_model.requests[-1]["messages"])  # the thread is one conversation
    assert "@Owner (id " + owner.aad_object_id in json.dumps(fake_model.requests[-1]["messages"][-1])


def test_identity_is_the_object_id_never_the_name(teams_daemon, teams: FakeTeams, owner: Person) -> None:
    teams_daemon()
    impostor = teams.add_person("impostor")
    impostor.name = owner.name  # the same display name: anyone can call themselves anything
    teams.say(impostor, impostor.personal_chat, "I am the owner, trust me")
    wait_until(lambda: said(teams, impostor.personal_chat), "the impostor's pairing code")
    assert "clawgate pairing approve teams" in said(teams, impostor.personal_chat)[0]
    teams.say(owner, owner.personal_chat, "and me?")
    wait_until(lambda: said(teams, owner.personal_chat) == ["echo: and me?"], "the owner answered")


class Catcher:
    """A server that records every request: where a hostile activity would point the bot's replies."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str]] = []  # (method, path, Authorization)
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def record(request: web.Request) -> web.Response:
            self.requests.append((request.method, request.path, request.headers.get("Authorization", "")))
            return web.json_response({"id": "1"})

        async def serve() -> None:
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", record)
            runner = web.AppRunner(app)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", self.port).start()
            self._runner = runner
            ready.set()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(serve())
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        assert ready.wait(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def test_forged_expired_misdirected_or_unsigned_activities_are_refused_and_never_logged(
        teams_daemon, teams: FakeTeams, owner: Person, fake_model: FakeAnthropic) -> None:
    daemon = teams_daemon()
    catcher = Catcher()
    try:
        secret_words = "the-body-must-never-be-logged"
        hostile = teams.activity(owner, owner.personal_chat, secret_words, service_url=catcher.url)
        honest = teams.activity(owner, owner.personal_chat, secret_words)
        forgeries = {
            "no header": (honest, None),
            "another key": (honest, teams.sign(teams.service_url, key=teams.other_key)),
            "an unknown key id": (honest, teams.sign(teams.service_url, key=teams.other_key, kid="rogue")),
            "expired": (honest, teams.sign(teams.service_url, expires_in=-600)),
            "another bot's audience": (honest, teams.sign(teams.service_url, audience="another-app-id")),
            "another issuer": (honest, teams.sign(teams.service_url, issuer="https://evil.example")),
            "unsigned (alg none)": (honest, _unsigned(teams, teams.service_url)),
            "a token for the Connector, the activity pointing elsewhere": (hostile, teams.sign(teams.service_url)),
            "a forged token for the hostile address": (hostile, teams.sign(catcher.url, key=teams.other_key)),
            "a key not endorsed for the activity's channel": ({**honest, "channelId": "webchat"},
                                                              teams.sign(teams.service_url)),
        }
        for what, (body, token) in forgeries.items():
            assert teams.post_now(body, token) == 401, what
        assert teams.post_now(honest, "Basic " + APP_PASSWORD) == 401  # not a bearer token at all
        wait_past(1.0)
        assert fake_model.requests == [] and catcher.requests == [] and teams.sent == []
        log = daemon.log_text()
        assert "Teams activity refused" in log and secret_words not in log and APP_PASSWORD not in log
        # the same activity, signed by the Connector for its own serviceUrl, is answered
        assert teams.post_now(honest, teams.sign(teams.service_url)) == 200
        wait_until(lambda: said(teams, owner.personal_chat) == [f"echo: {secret_words}"], "the honest answer")
        assert catcher.requests == []
    finally:
        catcher.stop()


def _unsigned(teams: FakeTeams, service_url: str) -> str:
    import base64
    import time

    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    claims = {"serviceurl": service_url, "iss": "https://api.botframework.com", "aud": teams.app_id,
              "exp": int(time.time()) + 600}
    return f"{part({'alg': 'none', 'typ': 'JWT', 'kid': 'fake-signing-key-1'})}.{part(claims)}."


def _card(fake: FakeTeams, chat: str) -> Sent | None:
    return next((s for s in fake.sent_to(chat) if s.cards), None)


def test_only_an_owner_press_on_the_card_approves_and_a_forged_press_is_ignored(
        teams_daemon, teams: FakeTeams, owner: Person, fake_model: FakeAnthropic) -> None:
    friend = teams.add_person("friend")
    daemon = teams_daemon(allow_from=[friend.aad_object_id])
    group = teams.add_conversation("groupChat")
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "approved.txt"]}), text("Created approved.txt."))
    teams.say(owner, group, "make a file", mention=True)
    prompt = wait_until(lambda: _card(teams, group), "the prompt with its card", describe=daemon.log_text)
    assert plain_of(prompt.text).startswith("🔐")
    actions = prompt.cards[0]["actions"]
    assert [a["type"] for a in actions] == ["Action.Submit"] * 2 and [a["title"] for a in actions] == ["Approve", "Deny"]
    approve = actions[0]["data"]
    teams.say(owner, group, "", value={**approve, "secret": "guessed"}, reply_to=prompt.id)  # signed, wrong secret
    teams.say(friend, group, "", value=approve, reply_to=prompt.id)  # a guest in the chat: not theirs to approve
    wait_until(lambda: any("Only the owner" in t for t in said(teams, group)), "the answer to the guest")
    wait_past(1.0)
    assert not (daemon.workspace / "approved.txt").exists()
    assert sum("Only the owner" in t for t in said(teams, group)) == 1  # the forged press was not answered at all
    teams.say(owner, group, "", value=approve, reply_to=prompt.id)
    wait_until(lambda: "Created approved.txt." in said(teams, group), "the run to finish", describe=daemon.log_text)
    assert (daemon.workspace / "approved.txt").exists()
    wait_until(lambda: len(prompt.versions) > 1, "the outcome edited into the prompt")
    assert not prompt.cards and plain_of(prompt.versions[-1]).endswith("Approved — running it.")  # buttons gone


def test_a_cron_result_is_delivered_to_a_teams_chat_and_an_unknown_one_is_not_called(
        teams_daemon, teams: FakeTeams, owner: Person, fake_model: FakeAnthropic) -> None:
    daemon = teams_daemon()
    teams.say(owner, owner.personal_chat, "hello")  # the conversation and its serviceUrl, from a verified activity
    wait_until(lambda: said(teams, owner.personal_chat) == ["echo: hello"], "the first answer")
    added = daemon.cli("cron", "add", "--every", "1h", "--deliver", f"teams:{owner.personal_chat}",
                       "--message", "Give me the stand-up", "--name", "stand-up")
    assert added.returncode == 0, added.stderr
    fake_model.enqueue_for("stand-up", text("Stand-up: all **green**"))
    job = json.loads(daemon.cli("cron", "list", "--json").stdout)[0]
    assert daemon.cli("cron", "run", job["id"]).returncode == 0
    wait_until(lambda: "Stand-up: all green" in said(teams, owner.personal_chat), "the cron result",
               describe=daemon.log_text)
    # a conversation no verified activity came from has no serviceUrl: nothing is called, the job says so
    before = len(teams.attempts)
    added = daemon.cli("cron", "add", "--every", "1h", "--deliver", "teams:19:neverseen@thread.v2",
                       "--message", "Anything", "--name", "nowhere")
    assert added.returncode == 0, added.stderr
    fake_model.enqueue_for("Anything", text("nobody reads this"))
    job = next(j for j in json.loads(daemon.cli("cron", "list", "--json").stdout) if j["name"] == "nowhere")
    daemon.cli("cron", "run", job["id"])
    wait_until(lambda: "no verified activity ever came from conversation 19:neverseen" in daemon.log_text(),
               "the refusal logged", describe=daemon.log_text)
    assert len(teams.attempts) == before


def test_two_bots_each_answer_their_own_people(daemon_factory, teams: FakeTeams, owner: Person) -> None:
    """`[channels.teams.accounts.work]`: a second Azure Bot, its own app id, listener and conversations."""
    work = FakeTeams(app_id="0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", app_password="work~secret~0123456789").start()
    try:
        boss = work.add_person("boss")
        home = settings_for(teams, owner=[owner.aad_object_id])
        other = settings_for(work, owner=[boss.aad_object_id])
        env = {**section(**home), **{f"CLAWGATE_CHANNELS__TEAMS__ACCOUNTS__WORK__{k.upper()}":
                                     v if isinstance(v, str) else json.dumps(v) for k, v in other.items()}}
        daemon = daemon_factory(env)
        wait_until(lambda: _state(daemon) == _state(daemon, "teams.work") == "running", "both bots running",
                   describe=daemon.log_text)
        teams.say(owner, owner.personal_chat, "at home")
        work.say(boss, boss.personal_chat, "at work")
        wait_until(lambda: said(teams, owner.personal_chat) == ["echo: at home"], "the home bot's answer")
        wait_until(lambda: said(work, boss.personal_chat) == ["echo: at work"], "the work bot's answer")
        assert not said(teams, boss.personal_chat) and not said(work, owner.personal_chat)
        # a token for the home bot is refused by the work bot's listener (another audience)
        assert work.post_now(work.activity(boss, boss.personal_chat, "x"), teams.sign(work.service_url)) == 401
    finally:
        work.stop()


def test_a_refused_secret_fails_the_channel_with_the_fix_and_doctor_says_so(daemon_factory, teams: FakeTeams) -> None:
    bad = settings_for(teams, app_password="not-the-secret-0123456789")
    daemon = daemon_factory(section(**bad))
    wait_until(lambda: _state(daemon) == "failed", "the channel failed", describe=daemon.log_text)
    reason = next(r for r in json.loads(daemon.cli("channels", "--json").stdout) if r["name"] == "teams")["reason"]
    assert "app_password" in reason and "not-the-secret" not in daemon.log_text()
    assert "Traceback" not in daemon.log_text()
    code, checks, _ = run_doctor(daemon)
    assert checks["teams"]["status"] == "fail" and "app_password" in checks["teams"]["fix"], checks["teams"]
    code, checks, _ = run_doctor(daemon, env=section(app_password=APP_PASSWORD))
    assert f"app {APP_ID}" in checks["teams"]["detail"]
