"""What the daemon's log says about its chat channels: one "connected to … as …" line per channel at
start, and none of the client libraries' per-event INFO chatter (matrix-nio, discord.py) or warnings
about voice packages the bot never uses — read from the real daemon's log, with all five channels
connected at once to the fakes, a real Synapse and a real Dovecot + aiosmtpd."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from clawgate.gateway.logs import parse_line
from tests.email_support import MailWorld, dovecot, mail_world  # noqa: F401
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.fakes.telegram_api import FakeTelegram
from tests.harness import DaemonProcess
from tests.matrix_support import Human, MatrixBot, humans, matrix_bot  # noqa: F401
from tests.servers.synapse import synapse  # noqa: F401
from tests.waiting import DEFAULT_TIMEOUT, wait_until

NO_PROXY = {name: "" for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")}
CONNECTED = {"telegram": "connected to Telegram as @", "discord": "connected to Discord as ",
             "slack": "connected to Slack as ", "matrix": "connected to Matrix as ", "email": "connected to IMAP "}


def settings_env(name: str, **values: Any) -> dict[str, str]:
    return {f"CLAWGATE_CHANNELS__{name.upper()}__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
            for k, v in values.items()}


def test_one_connected_line_per_channel_and_no_library_chatter(
        tmp_path: Path, daemon_factory: Callable[..., DaemonProcess], matrix_bot: MatrixBot,
        humans: Callable[..., Human], mail_world: MailWorld) -> None:
    with FakeTelegram() as telegram, FakeDiscord() as discord, FakeSlack() as slack:
        env = {**NO_PROXY, "TELEGRAM_BOT_TOKEN": telegram.token,
               **settings_env("telegram", base_url=telegram.base_url, poll_timeout_seconds=1),
               **settings_env("discord", token=discord.token, base_url=discord.base_url, dm_policy="open",
                              guild_ready_timeout_seconds=0.5),
               **settings_env("slack", enabled=True, bot_token=BOT_TOKEN, app_token=APP_TOKEN, base_url=slack.api_url),
               **matrix_bot.env(dm_policy="open", encryption=False)}
        home = DaemonProcess(tmp_path / "home", anthropic_url=None)
        home.init()
        with (home.home / "config.toml").open("a") as config:
            config.write(mail_world.section())
        daemon = daemon_factory(env, home=home.home, init=False)

        def lines() -> list[dict[str, str]]:
            return [parse_line(line) for line in daemon.log_text().splitlines()]

        wait_until(lambda: all(any(line["message"].startswith(prefix) for line in lines())
                               for prefix in CONNECTED.values()),
                   "every channel's connected line", timeout=DEFAULT_TIMEOUT * 2, describe=daemon.log_text)
        # events on the chattiest libraries' channels: a Matrix DM and a Discord DM, each answered
        alice = humans("alice")
        bot = matrix_bot.user.user_id
        room = alice.dm(bot)
        alice.wait(lambda: bot in alice.members(room), "the bot to join the DM", describe=daemon.log_text)
        alice.send(room, "hello matrix")
        alice.wait(lambda: [e for e in alice.seen(room, bot) if e.body == "echo: hello matrix"], "the Matrix answer",
                   describe=daemon.log_text)
        dm = discord.inject_dm("hello discord")["channel_id"]
        wait_until(lambda: "echo: hello discord" in discord.sent_texts(dm), "the Discord answer",
                   describe=daemon.log_text)

    log = lines()
    for name, prefix in CONNECTED.items():
        said = [line for line in log if line["message"].startswith(prefix)]
        assert len(said) == 1 and said[0]["level"] == "info", (name, said)
    text = daemon.log_text()
    assert "PyNaCl" not in text and "davey" not in text and "voice will NOT" not in text, text
    chatter = [line for line in log if line["level"] in ("info", "debug")
               and line["logger"].split(".")[0] in ("nio", "discord", "slack_sdk", "aiosmtplib", "imapclient")]
    assert chatter == [], chatter
