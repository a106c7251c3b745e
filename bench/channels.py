"""Chat channel overhead: what the channel kit and each adapter add on the way in and on the way out.

Per channel, 100 chats, one message each, one at a time, through the real `clawgate gateway` process:
- intake: from the platform handing over the message (the fake server queued it) to the model request
  arriving at the fake Messages API (long-poll wake-up, access, dedupe, inbox commit, loop pick-up);
- delivery: from the fake model answering to the platform receiving the reply (outbox, dispatcher,
  render, send).
The fake model (in this process, zero latency, echo) and the platforms' fake servers share the machine's
cores with the daemon; email runs against real servers (Dovecot, aiosmtpd), IRC against a real InspIRCd with Anope. Add a channel by adding a Platform (bench/channel_platform.py) below or beside the team chats'
(bench/team_chat_platforms.py) and naming it in PLATFORMS. Usage:
.venv/bin/python bench/channels.py [--chats 100] [--only telegram,teams]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.channel_platform import Platform, wait  # noqa: E402
from bench.core_bench import pct  # noqa: E402
from bench.team_chat_platforms import (DingTalkPlatform, FeishuPlatform, GoogleChatPlatform,  # noqa: E402
                                       MattermostPlatform, TeamsPlatform)
from tests.fakes.anthropic_api import FakeAnthropic, last_user_block, text  # noqa: E402
from tests.fakes.echochat import EchoChatServer  # noqa: E402
from tests.fakes.signal import BOT_NUMBER, FakeSignalCli  # noqa: E402
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, FakeSlack  # noqa: E402
from tests.fakes.telegram_api import FakeTelegram  # noqa: E402
from tests.fakes.whatsapp import APP_SECRET, PHONE_NUMBER_ID, TOKEN, VERIFY_TOKEN, FakeWhatsApp  # noqa: E402
from tests.fakes.whatsapp_linked import FakeWhatsAppLinked  # noqa: E402
from tests.fakes.whatsapp_linked.wire import SERVER_VARIABLE as WHATSAPP_LINKED_SERVER  # noqa: E402
from tests.harness import DaemonProcess, free_port  # noqa: E402


class TelegramPlatform(Platform):
    name = "telegram"

    def __init__(self) -> None:
        super().__init__()
        platform = self

        class Timed(FakeTelegram):
            def _dispatch(self, path: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
                if path.endswith("/sendMessage"):
                    platform.saw(str(params.get("text")))
                return super()._dispatch(path, params)

        self.fake = Timed().start()

    def env(self) -> dict[str, str]:
        return {"TELEGRAM_BOT_TOKEN": self.fake.token, "CLAWGATE_CHANNELS__TELEGRAM__BASE_URL": self.fake.base_url,
                "CLAWGATE_CHANNELS__TELEGRAM__DM_POLICY": "open", "CLAWGATE_CHANNELS__TELEGRAM__ACK_REACTION": ""}

    def inject(self, chat: int, text: str) -> None:
        self.fake.inject_message(10_000 + chat, text)

    def close(self) -> None:
        self.fake.stop()


class SlackPlatform(Platform):
    """The Slack adapter in Socket Mode against the fake Slack server (Web API + WebSocket)."""

    name = "slack"

    def __init__(self) -> None:
        super().__init__()
        platform = self

        class Timed(FakeSlack):
            def _dispatch(self, method: str, params: dict[str, Any], token: str | None) -> tuple[int, dict, dict]:
                if method == "chat.postMessage":
                    platform.saw(str(params.get("text")))
                return super()._dispatch(method, params, token)

        self.fake = Timed().start()

    def env(self) -> dict[str, str]:
        section = {"ENABLED": "true", "BOT_TOKEN": BOT_TOKEN, "APP_TOKEN": APP_TOKEN, "BASE_URL": self.fake.api_url,
                   "DM_POLICY": "open"}
        return {f"CLAWGATE_CHANNELS__SLACK__{k}": v for k, v in section.items()}

    def inject(self, chat: int, text: str) -> None:
        user, dm = f"U0BENCH{chat:04d}", f"D0BENCH{chat:04d}"
        with self.fake._cond:
            if dm not in self.fake.workspace.channels:
                self.fake.workspace.add_user(user, f"bench{chat}")
                self.fake.workspace.add_channel(dm, is_im=True, user=user)
        self.fake.send_message(text, user=user, channel=dm)

    def close(self) -> None:
        self.fake.stop()


class WhatsAppPlatform(Platform):
    """The WhatsApp adapter (Cloud API) against the fake Graph API, its messages as signed webhooks."""

    name = "whatsapp"

    def __init__(self) -> None:
        super().__init__()
        self.fake = FakeWhatsApp().start()
        self.fake.on_sent = lambda body: self.saw(str((body.get("text") or {}).get("body")))

    def env(self) -> dict[str, str]:
        port = free_port()
        self.fake.webhook_url = f"http://127.0.0.1:{port}/whatsapp/webhook"
        section = {"ACCESS_TOKEN": TOKEN, "PHONE_NUMBER_ID": PHONE_NUMBER_ID, "APP_SECRET": APP_SECRET,
                   "VERIFY_TOKEN": VERIFY_TOKEN, "BASE_URL": self.fake.base_url, "WEBHOOK_PORT": str(port),
                   "DM_POLICY": "open"}
        return {f"CLAWGATE_CHANNELS__WHATSAPP__{k}": v for k, v in section.items()}

    def inject(self, chat: int, text: str) -> None:
        self.fake.inject_message(f"1555900{chat:04d}", text=text)

    def close(self) -> None:
        self.fake.stop()


class WhatsAppLinkedPlatform(Platform):
    """The WhatsApp adapter as a linked device: the fake of neonize's client in the daemon (named by
    WHATSAPP_LINKED_TEST_CLIENT), its `MessageEv`s pushed by the fake WhatsApp here, sends answered there."""

    name = "whatsapp_linked"

    def __init__(self) -> None:
        super().__init__()
        platform = self

        class Timed(FakeWhatsAppLinked):
            def _answer(self, account: Any, call: dict[str, Any]) -> dict[str, Any]:
                answer = super()._answer(account, call)
                if call["method"] == "send_message" and answer["op"] == "result":
                    platform.saw(self.sent[-1].text)
                return answer

        self.fake = Timed()
        self.fake.start()

    def env(self) -> dict[str, str]:
        return {"CLAWGATE_CHANNELS__WHATSAPP__MODE": "linked", "CLAWGATE_CHANNELS__WHATSAPP__DM_POLICY": "open",
                "WHATSAPP_LINKED_TEST_CLIENT": "tests.fakes.whatsapp_linked.client",
                WHATSAPP_LINKED_SERVER: self.fake.address}

    def inject(self, chat: int, text: str) -> None:
        self.fake.text(f"1555900{chat:04d}", text)  # kept for the device until its session takes it

    def close(self) -> None:
        self.fake.stop()


class SignalPlatform(Platform):
    """The Signal adapter against the fake signal-cli daemon (JSON-RPC over HTTP, events over SSE)."""

    name = "signal"

    def __init__(self) -> None:
        super().__init__()
        platform = self

        class Timed(FakeSignalCli):
            def _do_send(self, account: str, params: dict[str, Any]) -> dict[str, Any]:
                platform.saw(str(params.get("message")))
                return super()._do_send(account, params)

        self.fake = Timed().start()
        self.people: dict[int, Any] = {}

    def env(self) -> dict[str, str]:
        section = {"ENABLED": "true", "ACCOUNT": BOT_NUMBER, "BASE_URL": self.fake.url, "DM_POLICY": "open"}
        return {f"CLAWGATE_CHANNELS__SIGNAL__{k}": v for k, v in section.items()}

    def inject(self, chat: int, text: str) -> None:
        if chat not in self.people:
            self.people[chat] = self.fake.add_person(f"bench{chat}", number=f"+1555020{chat:04d}")
        wait(lambda: self.fake.connected() and 1.0, 60)  # signal-cli streams a message to who listens now
        self.fake.write(self.people[chat], text)

    def close(self) -> None:
        self.fake.stop()


class EchoChatPlatform(Platform):
    """The example third-party channel (tests/plugins/echochat), installed with pip for the run."""

    name = "echochat"

    def __init__(self) -> None:
        super().__init__()
        from tests.conformance.platforms.echochat import install_plugin

        self.target = install_plugin()
        platform = self

        class Timed(EchoChatServer):
            def send(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
                platform.saw(str(body.get("text")))
                return super().send(body)

        self.fake = Timed().start()

    def env(self) -> dict[str, str]:
        return {"PYTHONPATH": self.target, "CLAWGATE_CHANNELS__ECHOCHAT__BASE_URL": self.fake.base_url,
                "CLAWGATE_CHANNELS__ECHOCHAT__TOKEN": self.fake.token, "CLAWGATE_CHANNELS__ECHOCHAT__DM_POLICY": "open"}

    def inject(self, chat: int, text: str) -> None:
        self.fake.inject(chat=f"dm-{chat}", user=f"u{chat}", text=text)

    def close(self) -> None:
        self.fake.stop()


class MatrixPlatform(Platform):
    """A real Synapse (tests/servers/synapse.py); the daemon reaches it through the loopback proxy, which notes
    when each reply arrives. One person writes in 101 DMs created (and joined by the bot) before timing starts."""

    name = "matrix"

    def __init__(self) -> None:
        super().__init__()
        from tests.matrix_support import Human
        from tests.servers.matrix_proxy import MatrixProxy
        from tests.servers.synapse import start_synapse

        self.root = Path(tempfile.mkdtemp(prefix="clawgate-bench-synapse-"))
        self.server = start_synapse(self.root)
        self.bot = self.server.register("bot")
        self.proxy = MatrixProxy(self.server.port, on_send=lambda content: self.saw(str(content.get("body"))))
        self.proxy.start()
        self.person = Human(self.server, self.server.register("person"), sync=False)
        self.rooms: list[str] = []

    def prepare(self, chats: int) -> None:
        self.rooms = [self.person.dm(self.bot.user_id) for _ in range(chats + 1)]

    def env(self) -> dict[str, str]:
        prefix = "CLAWGATE_CHANNELS__MATRIX__"
        return {f"{prefix}ENABLED": "true", f"{prefix}HOMESERVER": self.proxy.base_url,
                f"{prefix}USER_ID": self.bot.user_id, f"{prefix}PASSWORD": self.bot.password,
                f"{prefix}DM_POLICY": "open"}

    def inject(self, chat: int, text: str) -> None:
        self.person.send(self.rooms[chat], text)

    def close(self) -> None:
        self.person.close()
        self.proxy.stop()
        self.server.stop()


class DiscordPlatform(Platform):
    """The fake Discord (tests/fakes/discord) with the daemon's real discord.py: Gateway in, REST out."""

    name = "discord"

    def __init__(self) -> None:
        super().__init__()
        from tests.fakes.discord import payloads as P
        from tests.fakes.discord_api import FakeDiscord

        platform = self

        class Timed(FakeDiscord):
            async def _store_and_dispatch(self, message: dict[str, Any]) -> None:
                if message["author"]["id"] == self.bot_user["id"]:
                    platform.saw(str(message["content"]))
                await super()._store_and_dispatch(message)

        self.fake = Timed().start()
        self.users: dict[int, str] = {}
        self.make_user = lambda chat: P.user(P.snowflake(), f"user{chat}")

    def env(self) -> dict[str, str]:
        return {"CLAWGATE_CHANNELS__DISCORD__TOKEN": self.fake.token,
                "CLAWGATE_CHANNELS__DISCORD__BASE_URL": self.fake.base_url,
                "CLAWGATE_CHANNELS__DISCORD__DM_POLICY": "open"}

    def inject(self, chat: int, text: str) -> None:
        if not self.users:  # a message before the bot is online is one it never sees: wait for its session
            wait(lambda: 1.0 if self.fake.connected() else None, 60)
        if chat not in self.users:
            user = self.make_user(chat)
            self.fake.users[user["id"]] = user
            self.users[chat] = user["id"]
            self.fake.dm_channel_for(user["id"])
        self.fake.inject_dm(text, user_id=self.users[chat])

    def close(self) -> None:
        self.fake.stop()


class EmailPlatform(Platform):
    """Real servers: a Dovecot the bench starts (IMAP IDLE) and aiosmtpd (tests/email_servers.py). A message
    is handed over by an IMAP APPEND into the bot's inbox (what an MTA's delivery amounts to); the reply is
    seen when the SMTP server accepted it."""

    name = "email"
    bot = "bot@example.test"

    def __init__(self) -> None:
        super().__init__()
        from tests.email_servers import Dovecot, Sent, SmtpServer

        platform = self
        self.dovecot = Dovecot()
        self.dovecot.add_user(self.bot, "bench-password")

        class Timed(SmtpServer):
            def record(self, sent: Sent) -> None:
                body = sent.message.get_body(preferencelist=("plain",))
                platform.saw(str(body.get_content()).strip() if body is not None else "")
                super().record(sent)

        self.dovecot.start()
        self.smtp = Timed(users={self.bot: "bench-password"}).start()

    def env(self) -> dict[str, str]:
        values = {"address": self.bot, "password": "bench-password", "imap_host": "127.0.0.1",
                  "imap_port": self.dovecot.port, "imap_tls": "none", "smtp_port": self.smtp.port, "smtp_tls": "none",
                  "dm_policy": "open"}
        return {f"CLAWGATE_CHANNELS__EMAIL__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
                for k, v in values.items()}

    def inject(self, chat: int, text: str) -> None:
        raw = (f"From: u{chat}@example.test\r\nTo: {self.bot}\r\nSubject: bench\r\n"
               f"Message-ID: <bench-{chat}-{time.time_ns()}@example.test>\r\n\r\n{text}\r\n").encode()
        self.dovecot.append(self.bot, raw)

    def close(self) -> None:
        self.smtp.stop()
        self.dovecot.stop()


class IrcPlatform(Platform):
    """A real IRC network (InspIRCd + Anope, tests/irc_server.py) and one socket client per chat, each on its own
    nick; a reply is seen when the person's client reads the bot's PRIVMSG. The bot's flood pacing is lifted
    (burst 100, 100 lines/s): the default one line per 2 s is the network's rule, not the channel's overhead."""

    name = "irc"
    bot = "clawbench"

    def __init__(self) -> None:
        super().__init__()
        from tests.irc_server import IrcNetwork

        self.network = IrcNetwork().start()
        self.people: dict[int, Any] = {}
        self.online = False

    def prepare(self, chats: int) -> None:
        from tests.irc_server import IrcUser

        def heard(line: str) -> None:
            rest = line.split(" ", 1)[1] if line.startswith("@") else line
            if rest.startswith(f":{self.bot}!") and " PRIVMSG " in rest:
                self.saw(rest.split(" :", 1)[1])

        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(16) as pool:  # the server takes about a second to register each client
            joined = pool.map(lambda chat: IrcUser(self.network, f"person{chat}", on_line=heard).__enter__(),
                              range(chats + 1))
            self.people = dict(enumerate(joined))

    def env(self) -> dict[str, str]:
        values = {"enabled": "true", "host": "127.0.0.1", "port": str(self.network.port), "tls": "false",
                  "nick": self.bot, "dm_policy": "open", "flood_burst": "100", "flood_lines_per_second": "100"}
        return {f"CLAWGATE_CHANNELS__IRC__{k.upper()}": v for k, v in values.items()}

    def inject(self, chat: int, text: str) -> None:
        person = self.people[chat]
        if not self.online:  # a PRIVMSG to a nick not yet on the network is refused (401): wait for the bot
            def bot_on() -> float | None:
                before = len(person.lines)
                person.send(f"ISON {self.bot}")
                deadline = time.monotonic() + 2
                while time.monotonic() < deadline:
                    if any(" 303 " in ln and self.bot in ln.split(" :", 1)[-1] for ln in person.lines[before:]):
                        return 1.0
                    time.sleep(0.05)
                return None
            wait(bot_on, 120)
            self.online = True
        person.say(self.bot, text)

    def close(self) -> None:
        for person in self.people.values():
            person.__exit__()
        self.network.stop()


PLATFORMS: dict[str, Callable[[], Platform]] = {"telegram": TelegramPlatform, "discord": DiscordPlatform,
                                                "slack": SlackPlatform, "matrix": MatrixPlatform,
                                                "email": EmailPlatform, "signal": SignalPlatform, "mattermost": MattermostPlatform,
                                                "echochat": EchoChatPlatform, "whatsapp": WhatsAppPlatform,
                                                "googlechat": GoogleChatPlatform, "dingtalk": DingTalkPlatform,
                                                "teams": TeamsPlatform, "feishu": FeishuPlatform, "irc": IrcPlatform,
                                                "whatsapp_linked": WhatsAppLinkedPlatform}


def measure(make: Callable[[], Platform], chats: int) -> tuple[list[float], list[float]]:
    """(intake ms, delivery ms) of `chats` messages, each in its own chat."""
    asked: dict[str, float] = {}
    answered: dict[str, float] = {}

    def responder(body: dict) -> Any:
        said = last_user_block(body)
        asked.setdefault(said, time.perf_counter())
        reply = text("echo: " + said)
        answered.setdefault(said, time.perf_counter())
        return reply

    platform = make()
    platform.prepare(chats)
    model = FakeAnthropic(responder).start()
    model.record_requests = False
    home = Path(tempfile.mkdtemp(prefix="clawgate-bench-channels-"))
    daemon = DaemonProcess(home, anthropic_url=model.base_url, env={**platform.env(), "CLAWGATE_LOG__LEVEL": "warning"})
    daemon.init()
    daemon.start()
    intake, delivery = [], []
    try:
        warm = "warm up"
        injected = time.perf_counter()
        platform.inject(0, warm)
        wait(lambda: platform.sent_at.get(f"echo: {warm}"), 60)
        for i in range(1, chats + 1):
            said = f"ping {i}"
            injected = time.perf_counter()
            platform.inject(i, said)
            sent = wait(lambda: platform.sent_at.get(f"echo: {said}"), 60)
            intake.append((asked[said] - injected) * 1000)
            delivery.append((sent - answered[said]) * 1000)
    finally:
        daemon.kill()
        model.stop()
        platform.close()
    return intake, delivery


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--only", action="append", metavar="NAME[,NAME…]",
                        help="channels to measure, repeated or comma-separated: " + ", ".join(sorted(PLATFORMS)))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    only = [name.strip() for value in args.only or [] for name in value.split(",") if name.strip()]
    unknown = sorted(set(only) - set(PLATFORMS))
    if unknown:
        parser.error(f"--only: no channel named {', '.join(unknown)}; choose from {', '.join(sorted(PLATFORMS))}")
    rows = {}
    for name in only or list(PLATFORMS):
        intake, delivery = measure(PLATFORMS[name], args.chats)
        rows[name] = {"intake_p50": pct(intake, 0.5), "intake_p99": pct(intake, 0.99),
                      "delivery_p50": pct(delivery, 0.5), "delivery_p99": pct(delivery, 0.99), "chats": args.chats}
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'channel':15} {'intake p50':>11} {'intake p99':>11} {'delivery p50':>13} {'delivery p99':>13}  (ms, "
          f"{args.chats} chats)")
    for name, r in rows.items():
        print(f"{name:15} {r['intake_p50']:11.1f} {r['intake_p99']:11.1f} {r['delivery_p50']:13.1f} "
              f"{r['delivery_p99']:13.1f}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
