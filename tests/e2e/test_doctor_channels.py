"""`clawgate doctor` logs in to each enabled channel for real, through the real CLI: against the
fakes (Telegram, Discord, Slack, each also refusing our credentials and behind a wrong base URL),
a real Synapse and a real Dovecot + aiosmtpd; with no daemon, and with one running."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from typing import Any, Iterator

import pytest

from clawgate.channels.kit.probe import ProbeResult
from clawgate.config.paths import Paths
from clawgate.gateway import doctor_channels
from tests.email_servers import Dovecot, SmtpServer, dovecot, unique_address  # noqa: F401
from tests.e2e.test_doctor import home, run_doctor  # noqa: F401  (the initialised-home fixture)
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.fakes.telegram_api import FakeTelegram
from tests.harness import DaemonProcess
from tests.matrix_support import MatrixBot, matrix_bot  # noqa: F401
from tests.servers.synapse import synapse  # noqa: F401
from tests.waiting import wait_until

NO_PROXY = {name: "" for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")}


def section(name: str, **values: Any) -> dict[str, str]:
    return {f"CLAWGATE_CHANNELS__{name.upper()}__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
            for k, v in values.items()}


def channel_line(home: DaemonProcess, env: dict[str, str], name: str) -> tuple[int, dict[str, str], str]:
    code, checks, raw = run_doctor(home, env={**NO_PROXY, **env})
    assert checks["channels"]["status"] == "ok" and name in checks["channels"]["detail"], checks["channels"]
    return code, checks[name], raw


def test_telegram_logged_in_refused_and_wrong_base_url(home: DaemonProcess) -> None:
    with FakeTelegram() as telegram:
        env = {"TELEGRAM_BOT_TOKEN": telegram.token, "CLAWGATE_CHANNELS__TELEGRAM__BASE_URL": telegram.base_url}
        code, line, _ = channel_line(home, env, "telegram")
        assert code == 0 and line["status"] == "ok", line
        assert line["detail"] == f"logged in as @{telegram.bot_username}"
        assert [name for name, _ in telegram.calls] == ["getMe"]  # nothing else: no deleteWebhook, no polling

        code, line, raw = channel_line(home, {**env, "TELEGRAM_BOT_TOKEN": "999:WRONG-TOKEN"}, "telegram")
        assert code == 1 and line["status"] == "fail" and "refused the bot token" in line["detail"], line
        assert "TELEGRAM_BOT_TOKEN" in line["fix"] and "@BotFather" in line["fix"] and "WRONG-TOKEN" not in raw

        code, line, raw = channel_line(home, {**env, "TELEGRAM_BOT_TOKEN": "pasted-half"}, "telegram")
        assert code == 1 and "not shaped like one" in line["detail"] and "pasted-half" not in raw, line
        code, line, _ = channel_line(home, {**env, "TELEGRAM_BOT_TOKEN": "", "CLAWGATE_CHANNELS__TELEGRAM__ENABLED": "true"},
                                     "telegram")
        assert code == 1 and line["detail"] == "no bot token is set" and "TELEGRAM_BOT_TOKEN" in line["fix"], line

        wrong = telegram.base_url.removesuffix("/bot") + "/telegram/bot"
        code, line, raw = channel_line(home, {**env, "CLAWGATE_CHANNELS__TELEGRAM__BASE_URL": wrong}, "telegram")
        assert code == 1 and line["status"] == "fail" and "HTTP 404" in line["detail"], line
        assert "not Telegram's API" in line["detail"] and "channels.telegram.base_url" in line["fix"]
        assert telegram.token not in raw


def test_discord_logged_in_refused_and_wrong_base_url(home: DaemonProcess) -> None:
    with FakeDiscord() as discord:
        env = section("discord", enabled=True, token=discord.token, base_url=discord.api_url)
        code, line, _ = channel_line(home, env, "discord")
        assert code == 0 and line == {**line, "status": "ok", "detail": "logged in as clawgate-bot"}, line
        assert discord.identifies == 0  # the REST log-in only: no Gateway session was opened
        assert [c.path for c in discord.requests("GET", "/users/@me")], "GET /users/@me was not called"

        code, line, raw = channel_line(home, {**env, **section("discord", token="not.the.token")}, "discord")
        assert code == 1 and line["status"] == "fail" and line["detail"] == "Discord refused the bot token", line
        assert "CLAWGATE_CHANNELS__DISCORD__TOKEN" in line["fix"] and "not.the.token" not in raw

        wrong = discord.api_url.replace("/v10", "/v6")
        code, line, raw = channel_line(home, {**env, **section("discord", base_url=wrong)}, "discord")
        assert code == 1 and "HTTP 404" in line["detail"] and "channels.discord.base_url" in line["fix"], line
        assert discord.token not in raw


def test_slack_logged_in_each_token_refused_and_wrong_base_url(home: DaemonProcess) -> None:
    with FakeSlack() as slack:
        env = section("slack", enabled=True, bot_token=BOT_TOKEN, app_token=APP_TOKEN, base_url=slack.api_url)
        code, line, _ = channel_line(home, env, "slack")
        assert code == 0 and line["status"] == "ok" and line["detail"].startswith("logged in as "), line
        assert not slack.socket.open_connections()  # apps.connections.open hands out an address; none is opened

        code, line, raw = channel_line(home, {**env, **section("slack", bot_token="xoxb-revoked")}, "slack")
        assert code == 1 and line["detail"] == "Slack refused the bot_token (invalid_auth)", line
        assert "CLAWGATE_CHANNELS__SLACK__BOT_TOKEN" in line["fix"] and "xoxb-revoked" not in raw
        code, line, raw = channel_line(home, {**env, **section("slack", app_token="xapp-revoked")}, "slack")
        assert code == 1 and line["detail"] == "Slack refused the app_token (invalid_auth)", line
        assert "connections:write" in line["fix"] and "xapp-revoked" not in raw

        wrong = slack.api_url.rstrip("/") + "/v2/"
        code, line, _ = channel_line(home, {**env, **section("slack", base_url=wrong)}, "slack")
        assert code == 1 and "HTTP 404" in line["detail"] and "channels.slack.base_url" in line["fix"], line


def test_matrix_token_and_password_logged_in_refused_and_wrong_homeserver(home: DaemonProcess,
                                                                         matrix_bot: MatrixBot) -> None:
    user, base = matrix_bot.user, matrix_bot.server.base_url
    token = matrix_bot.login()
    env = section("matrix", enabled=True, homeserver=base, user_id=user.user_id, access_token=token, encryption=False)
    code, line, _ = channel_line(home, env, "matrix")
    assert code == 0 and line["status"] == "ok", line
    assert line["detail"].startswith(f"logged in as {user.user_id} on {base}; ") and "encryption = false" in line["detail"]

    code, line, raw = channel_line(home, {**env, **section("matrix", access_token="syt_not_a_token")}, "matrix")
    assert code == 1 and line["detail"].startswith("Matrix refused the credentials"), line
    assert "channels.matrix.access_token" in line["fix"] and "syt_not_a_token" not in raw

    code, line, _ = channel_line(home, {**env, **section("matrix", homeserver=base + "/matrix")}, "matrix")
    assert code == 1 and "HTTP 404" in line["detail"] and "channels.matrix.homeserver" in line["fix"], line

    # a password logs in as a device of its own and logs it out again: the account's devices are as before
    devices = {d["device_id"] for d in matrix_bot.devices()}
    password = {k: v for k, v in env.items() if not k.endswith("ACCESS_TOKEN")}
    code, line, _ = channel_line(home, {**password, **section("matrix", password=user.password)}, "matrix")
    assert code == 0 and line["detail"].startswith(f"logged in as {user.user_id}"), line
    assert {d["device_id"] for d in matrix_bot.devices()} == devices
    code, line, raw = channel_line(home, {**password, **section("matrix", password="wrong-password")}, "matrix")
    assert code == 1 and "refused the credentials" in line["detail"] and "channels.matrix.password" in line["fix"]
    assert "wrong-password" not in raw


@pytest.fixture
def mailbox(dovecot: Dovecot) -> Iterator[tuple[str, str, SmtpServer]]:  # noqa: F811
    bot = unique_address("bot")
    dovecot.add_user(bot, "pw-imap")
    smtp = SmtpServer(dovecot, users={bot: "pw-smtp"}).start()
    yield bot, "pw-imap", smtp
    smtp.stop()


def test_email_imap_login_and_smtp_auth_each_refused(home: DaemonProcess, dovecot: Dovecot,  # noqa: F811
                                                      mailbox: tuple[str, str, SmtpServer]) -> None:
    bot, password, smtp = mailbox
    env = section("email", address=bot, password=password, imap_host="127.0.0.1", imap_port=dovecot.port,
                  imap_tls="none", smtp_port=smtp.port, smtp_tls="none", smtp_password="pw-smtp")
    code, line, _ = channel_line(home, env, "email")
    assert code == 0 and line["status"] == "ok", line
    assert f"logged in as {bot}" in line["detail"] and f"SMTP 127.0.0.1:{smtp.port} EHLO ok" in line["detail"]
    assert smtp.sent == []  # nothing is sent

    code, line, raw = channel_line(home, {**env, **section("email", password="imap-wrong")}, "email")
    assert code == 1 and "IMAP" in line["detail"] and "refused the login" in line["detail"], line
    assert "channels.email.username / password" in line["fix"] and "imap-wrong" not in raw

    code, line, raw = channel_line(home, {**env, **section("email", smtp_password="smtp-wrong")}, "email")
    assert code == 1 and line["detail"].startswith(f"SMTP 127.0.0.1:{smtp.port} refused the login"), line
    assert "smtp_password" in line["fix"] and "smtp-wrong" not in raw


def test_a_running_daemon_adds_its_view_to_the_channel_line(home: DaemonProcess, daemon_factory) -> None:
    with FakeTelegram() as telegram:
        env = {"TELEGRAM_BOT_TOKEN": telegram.token, "CLAWGATE_CHANNELS__TELEGRAM__BASE_URL": telegram.base_url}
        home.env.update(env)
        running = daemon_factory(env, home=home.home, init=False)
        wait_until(lambda: '"running"' in running.cli("channels", "--json").stdout, "the daemon's Telegram channel",
                   describe=running.log_text)
        code, checks, _ = run_doctor(running)
        assert code == 0 and checks["channels"]["detail"].endswith("enabled: telegram; daemon running")
        assert checks["telegram"]["detail"] == f"logged in as @{telegram.bot_username}; daemon: running", checks


def test_a_probe_that_hangs_is_bounded_and_said_in_one_line(home: DaemonProcess, monkeypatch) -> None:
    """A server that accepts the connection and never answers: the line says so within the bound."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def hold() -> None:
        silent.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(silent.accept()[0])
            except OSError:
                continue

    threading.Thread(target=hold, daemon=True).start()
    monkeypatch.setattr(doctor_channels, "PROBE_SECONDS", 2.0)
    try:
        env = {**home.env, **NO_PROXY, "TELEGRAM_BOT_TOKEN": "123:SILENT",
               "CLAWGATE_CHANNELS__TELEGRAM__BASE_URL": f"http://127.0.0.1:{silent.getsockname()[1]}"}
        from clawgate.config.loader import load

        _, settings = load(Paths(home.home).home, env)
        [_, line] = doctor_channels.check_channels(Paths(home.home), settings, states=lambda *_: None)
    finally:
        stop.set()
        for conn in accepted:
            conn.close()
        silent.close()
    assert line == ("telegram", "warn", "no answer within 2 s", line[3]) and "network" in line[3], line


def test_an_adapter_without_a_probe_or_with_a_broken_one_gets_one_line() -> None:
    class Quiet:
        @classmethod
        async def probe(cls, settings: Any) -> None:
            return None

    class Broken:
        @classmethod
        async def probe(cls, settings: Any) -> ProbeResult:
            raise KeyError("boom")

    quiet = asyncio.run(doctor_channels._probe_one(Quiet, None))  # type: ignore[arg-type]
    broken = asyncio.run(doctor_channels._probe_one(Broken, None))  # type: ignore[arg-type]
    assert quiet.status == "ok" and "no log-in probe" in quiet.detail
    assert broken.status == "fail" and broken.detail == "the probe failed: KeyError: 'boom'"


def test_offline_logs_in_nowhere(home: DaemonProcess) -> None:
    with FakeTelegram() as telegram:
        env = {"TELEGRAM_BOT_TOKEN": telegram.token, "CLAWGATE_CHANNELS__TELEGRAM__BASE_URL": telegram.base_url}
        code, checks, _ = run_doctor(home, "--offline", env=env)
        assert code == 0 and checks["telegram"]["status"] == "skip" and telegram.calls == []

