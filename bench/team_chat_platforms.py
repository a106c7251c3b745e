"""The team chats' platforms for bench/channels.py: Google Chat, Teams, Mattermost, DingTalk and Feishu, each
its adapter against its fake server in tests/fakes."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.channel_platform import Platform, wait  # noqa: E402
from tests.fakes.dingtalk import CLIENT_SECRET as DINGTALK_SECRET  # noqa: E402
from tests.fakes.dingtalk import FakeDingTalk, Sent  # noqa: E402
from tests.fakes.feishu import APP_ID as FEISHU_APP_ID  # noqa: E402
from tests.fakes.feishu import APP_SECRET as FEISHU_APP_SECRET  # noqa: E402
from tests.fakes.feishu import FakeFeishu  # noqa: E402
from tests.fakes.googlechat import PROJECT_NUMBER, FakeGoogleChat  # noqa: E402
from tests.fakes.mattermost import BOT_TOKEN as MATTERMOST_TOKEN  # noqa: E402
from tests.fakes.mattermost import FakeMattermost  # noqa: E402
from tests.fakes.teams import FakeTeams  # noqa: E402
from tests.harness import free_port  # noqa: E402


class GoogleChatPlatform(Platform):
    """The Google Chat adapter against the fake Chat API, its messages as signed events to its endpoint."""

    name = "googlechat"

    def __init__(self) -> None:
        super().__init__()
        self.fake = FakeGoogleChat().start()
        self.fake.on_sent = self.saw
        self.users: list[Any] = []
        self.folder = Path(tempfile.mkdtemp(prefix="bench-googlechat-"))

    def prepare(self, chats: int) -> None:
        self.users = [self.fake.add_user(f"user{i}") for i in range(chats + 1)]

    def env(self) -> dict[str, str]:
        port = free_port()
        self.fake.endpoint_url = f"http://127.0.0.1:{port}/googlechat/events"
        key = self.folder / "key.json"
        key.write_text(json.dumps(self.fake.key()))
        section = {"CREDENTIALS_FILE": str(key), "AUDIENCE": PROJECT_NUMBER, "BASE_URL": self.fake.base_url,
                   "CERTS_URL": self.fake.certs_url, "LISTEN_PORT": str(port), "DM_POLICY": "open"}
        return {f"CLAWGATE_CHANNELS__GOOGLECHAT__{k}": v for k, v in section.items()}

    def inject(self, chat: int, text: str) -> None:
        user = self.users[chat]
        self.fake.write(user, user.dm, text)
class TeamsPlatform(Platform):
    """The Teams adapter against the fake Microsoft endpoints, its activities signed JWTs POSTed to the listener."""

    name = "teams"

    def __init__(self) -> None:
        super().__init__()
        self.fake = FakeTeams().start()
        self.fake.on_sent = lambda sent: self.saw(sent.text.removeprefix("<p>").removesuffix("</p>"))
        self.people: dict[int, Any] = {}

    def env(self) -> dict[str, str]:
        port = free_port()
        self.fake.endpoint = f"http://127.0.0.1:{port}/api/messages"
        section = {"APP_ID": self.fake.app_id, "APP_PASSWORD": self.fake.app_password, "LISTEN_PORT": str(port),
                   "OPENID_METADATA_URL": self.fake.openid_url, "TOKEN_URL": self.fake.token_url, "DM_POLICY": "open"}
        return {f"CLAWGATE_CHANNELS__TEAMS__{k}": v for k, v in section.items()}

    def inject(self, chat: int, text: str) -> None:
        if chat not in self.people:
            self.people[chat] = self.fake.add_person(f"bench{chat}")
        person = self.people[chat]
        self.fake.say(person, person.personal_chat, text)

    def close(self) -> None:
        self.fake.stop()


class MattermostPlatform(Platform):
    """The Mattermost adapter against the fake Mattermost server (REST v4, events over the WebSocket)."""

    name = "mattermost"

    def __init__(self) -> None:
        super().__init__()
        platform = self

        class Timed(FakeMattermost):
            def _create_post(self, body: dict[str, Any]) -> Any:
                platform.saw(str(body.get("message")))
                return super()._create_post(body)

        self.fake = Timed().start()
        self.dms: dict[int, tuple[Any, str]] = {}

    def env(self) -> dict[str, str]:
        section = {"ENABLED": "true", "TOKEN": MATTERMOST_TOKEN, "BASE_URL": self.fake.url, "DM_POLICY": "open"}
        return {f"CLAWGATE_CHANNELS__MATTERMOST__{k}": v for k, v in section.items()}

    def inject(self, chat: int, text: str) -> None:
        if chat not in self.dms:
            user = self.fake.add_user(f"bench{chat}")
            self.dms[chat] = (user, self.fake.dm_channel(user))
        wait(lambda: self.fake.connected() and 1.0, 60)  # the WebSocket pushes a post to who listens now
        self.fake.write(*self.dms[chat], text)

    def close(self) -> None:
        self.fake.stop()


class DingTalkPlatform(Platform):
    """The DingTalk adapter (the official Stream SDK) against the fake DingTalk: envelopes over the Stream
    WebSocket in, replies through each message's session webhook out."""

    name = "dingtalk"

    def __init__(self) -> None:
        super().__init__()
        platform = self

        class Timed(FakeDingTalk):
            def _record(self, sent: Sent) -> None:
                platform.saw(sent.text)
                super()._record(sent)

        self.fake = Timed().start()
        self.people: dict[int, Any] = {}

    def env(self) -> dict[str, str]:
        section = {"ENABLED": "true", "CLIENT_ID": self.fake.client_id, "CLIENT_SECRET": DINGTALK_SECRET,
                   "BASE_URL": self.fake.url, "DM_POLICY": "open"}
        return {f"CLAWGATE_CHANNELS__DINGTALK__{k}": v for k, v in section.items()}

    def inject(self, chat: int, text: str) -> None:
        if chat not in self.people:
            self.people[chat] = self.fake.add_person(f"bench{chat}")
        wait(lambda: self.fake.connected() and 1.0, 60)
        self.fake.write(self.people[chat], text)

    def close(self) -> None:
        self.fake.stop()


class FeishuPlatform(Platform):
    """The Feishu adapter (lark-oapi) against the fake Open Platform: events over the long connection's
    protobuf frames, replies through im/v1/messages."""

    name = "feishu"

    def __init__(self) -> None:
        super().__init__()
        platform = self

        class Timed(FakeFeishu):
            def _create(self, chat_id: str, body: dict[str, Any], **kw: Any) -> Any:
                content = json.loads(str(body.get("content") or "{}"))
                for paragraph in (content.get("zh_cn") or {}).get("content") or []:
                    platform.saw("".join(str(el.get("text") or "") for el in paragraph))
                return super()._create(chat_id, body, **kw)

        self.fake = Timed().start()
        self.chats: dict[int, tuple[Any, str]] = {}

    def env(self) -> dict[str, str]:
        section = {"ENABLED": "true", "APP_ID": FEISHU_APP_ID, "APP_SECRET": FEISHU_APP_SECRET,
                   "DOMAIN": self.fake.url, "DM_POLICY": "open"}
        return {f"CLAWGATE_CHANNELS__FEISHU__{k}": v for k, v in section.items()}

    def inject(self, chat: int, text: str) -> None:
        if chat not in self.chats:
            user = self.fake.add_user(f"bench{chat}")
            self.chats[chat] = (user, self.fake.p2p_chat(user))
        wait(lambda: self.fake.connected() and 1.0, 60)  # an event is sent to the connection open now
        self.fake.write(*self.chats[chat], text)

    def close(self) -> None:
        self.fake.stop()
