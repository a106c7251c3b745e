"""Several bot accounts of one channel in one daemon, end to end: the real daemon process, real
python-telegram-bot and discord.py, each account on a fake server of its own.

`[channels.<name>.accounts.<account>]` beside the section's own keys (written to config.toml as a user
would; the shared keys come from the environment, which overlays the section): each account answers its
own chats through its own connection, keeps its own offsets and sessions (`telegram.work:<chat>`), has
its own line in `clawgate channels`, and one that fails (a bad token) stops nothing else.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.anthropic_api import FakeAnthropic, text
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.telegram_api import FakeTelegram
from tests.harness import DaemonProcess
from tests.telegram_support import CHAT, DELIVERY_RETRY, POLL_TIMEOUT, RETRY_BASE, replies, user_texts
from tests.waiting import DEFAULT_TIMEOUT, wait_until

HOME_TOKEN, WORK_TOKEN = "111111:HOME-TOKEN", "222222:WORK-TOKEN"


@pytest.fixture
def home_bot() -> Iterator[FakeTelegram]:
    with FakeTelegram(HOME_TOKEN, "home_bot") as fake:
        yield fake


@pytest.fixture
def work_bot() -> Iterator[FakeTelegram]:
    with FakeTelegram(WORK_TOKEN, "work_bot") as fake:
        yield fake


def start_with_config(daemon_factory: Callable[..., DaemonProcess], tmp_path: Path, env: dict[str, str],
                      config: str) -> DaemonProcess:
    """A daemon whose config.toml ends with `config` (after the [channels.telegram] `clawgate init` writes)."""
    home = tmp_path / "accounts-home"
    DaemonProcess(home, anthropic_url=None).init()
    with (home / "config.toml").open("a", encoding="utf-8") as out:
        out.write("\n" + config)
    return daemon_factory(env, home=home, init=False)


def telegram_env(home: FakeTelegram) -> dict[str, str]:
    """The section's own account (the default) and the keys every account shares."""
    return {"TELEGRAM_BOT_TOKEN": home.token, "CLAWGATE_CHANNELS__TELEGRAM__BASE_URL": home.base_url,
            "CLAWGATE_CHANNELS__TELEGRAM__POLL_TIMEOUT_SECONDS": str(POLL_TIMEOUT),
            "CLAWGATE_CHANNELS__TELEGRAM__DM_POLICY": "open",
            "CLAWGATE_CHANNELS__TELEGRAM__RETRY_BASE_SECONDS": str(RETRY_BASE),
            "CLAWGATE_CHANNELS__DELIVERY_RETRY_SECONDS": str(DELIVERY_RETRY)}


def channel_rows(daemon: DaemonProcess) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in json.loads(daemon.cli("channels", "--json").stdout)}


def cursors(daemon: DaemonProcess) -> dict[str, str]:
    """Each channel's saved cursor (Telegram: the getUpdates offset), as the daemon stored it."""
    with sqlite3.connect(daemon.home / "state" / "clawgate.db") as db:
        return dict(db.execute("SELECT channel, value FROM channel_state WHERE key = 'cursor'").fetchall())


def test_two_telegram_bots_answer_each_their_own_chats(daemon_factory, tmp_path: Path, home_bot: FakeTelegram,
                                                       work_bot: FakeTelegram, fake_model: FakeAnthropic) -> None:
    daemon = start_with_config(daemon_factory, tmp_path, telegram_env(home_bot),
                               f'[channels.telegram.accounts.work]\ntoken = "{WORK_TOKEN}"\n'
                               f'base_url = "{work_bot.base_url}"\n')
    fake_model.enqueue(text("home answer"))
    home_bot.inject_message(CHAT, "hello home")
    home_bot.wait_for(lambda: replies(home_bot, CHAT) == ["home answer"])
    fake_model.enqueue(text("work answer"))
    work_bot.inject_message(CHAT, "hello work")  # the same chat id on the other bot: another conversation
    work_bot.wait_for(lambda: replies(work_bot, CHAT) == ["work answer"])

    assert replies(home_bot, CHAT) == ["home answer"]  # nothing crossed between the bots
    assert user_texts(fake_model.requests[1]) == ["hello work"]  # the work chat's own session, not the home one
    sessions = daemon.home / "state" / "sessions"
    assert (sessions / "telegram%3A4242.jsonl").exists()  # the default account's key as it always was
    assert (sessions / "telegram.work%3A4242.jsonl").exists()
    # each bot confirmed its own update, and each account keeps its own offset
    home_bot.wait_for(lambda: home_bot.confirmed_offset > 0 and home_bot.pending_updates() == 0)
    work_bot.wait_for(lambda: work_bot.confirmed_offset > 0 and work_bot.pending_updates() == 0)
    saved = wait_until(lambda: (c := cursors(daemon)) and {"telegram", "telegram.work"} <= set(c) and c,
                       "both accounts' offsets saved")
    assert int(saved["telegram"]) == home_bot.confirmed_offset
    assert int(saved["telegram.work"]) == work_bot.confirmed_offset

    rows = wait_until(lambda: (r := channel_rows(daemon)) and r.get("telegram.work", {}).get("state") == "running"
                      and r["telegram"]["state"] == "running" and r, "both accounts running in `clawgate channels`")
    assert rows["telegram.work"]["installed"] == rows["telegram"]["installed"] == \
        "clawgate.channels.telegram:TelegramAdapter"
    assert rows["telegram.work"]["enabled"] and rows["telegram"]["enabled"]
    listing = daemon.cli("channels").stdout
    assert "telegram.work" in listing
    assert "telegram.work: running" in daemon.cli("status").stdout
    # doctor logs in to each account and adds what the daemon says of it, a line each
    doctor = daemon.cli("doctor", "--json", timeout=120)
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert "logged in as @work_bot" in checks["telegram.work"]["detail"], checks["telegram.work"]
    assert "logged in as @home_bot" in checks["telegram"]["detail"]
    assert "daemon: running" in checks["telegram.work"]["detail"] and checks["telegram.work"]["status"] == "ok"
    assert WORK_TOKEN not in doctor.stdout and HOME_TOKEN not in doctor.stdout

    # a cron job delivers through the account named in its target
    added = daemon.cli("cron", "add", "--every", "1h", "--deliver", f"telegram.work:{CHAT}", "--message", "ping",
                       "--name", "work-ping")
    assert added.returncode == 0, added.stderr
    fake_model.enqueue(text("pong from the work bot"))
    job = json.loads(daemon.cli("cron", "list", "--json").stdout)[0]
    assert job["deliver"] == f"telegram.work:{CHAT}"
    assert daemon.cli("cron", "run", job["id"]).returncode == 0
    work_bot.wait_for(lambda: "pong from the work bot" in replies(work_bot, CHAT))
    assert "pong from the work bot" not in replies(home_bot, CHAT)


def test_a_failing_account_stops_nothing_else(daemon_factory, tmp_path: Path, home_bot: FakeTelegram,
                                              work_bot: FakeTelegram, fake_model: FakeAnthropic) -> None:
    daemon = start_with_config(daemon_factory, tmp_path, telegram_env(home_bot),
                               '[channels.telegram.accounts.work]\ntoken = "222222:REVOKED"\n'
                               f'base_url = "{work_bot.base_url}"\n')
    rows = wait_until(lambda: (r := channel_rows(daemon)) and r.get("telegram.work", {}).get("state") == "failed"
                      and r, "the account with the refused token failed")
    assert "channels.telegram.accounts.work.token" in rows["telegram.work"]["reason"]  # the fix names the account
    failed = [line for line in daemon.log_text().splitlines() if "telegram.work failed" in line]
    assert len(failed) == 1 and "REVOKED" not in daemon.log_text() and "Traceback" not in daemon.log_text()

    fake_model.enqueue(text("still here"))
    home_bot.inject_message(CHAT, "are you there?")
    home_bot.wait_for(lambda: replies(home_bot, CHAT) == ["still here"])
    assert channel_rows(daemon)["telegram"]["state"] == "running"


def test_two_accounts_naming_one_bot_are_refused_in_one_line(tmp_path: Path, home_bot: FakeTelegram) -> None:
    daemon = DaemonProcess(tmp_path / "home", anthropic_url=None, env=telegram_env(home_bot))
    daemon.init()
    with (daemon.home / "config.toml").open("a", encoding="utf-8") as out:
        out.write(f'\n[channels.telegram.accounts.Work]\ntoken = "{WORK_TOKEN}"\n')
    started = daemon.cli("gateway", timeout=60)
    assert started.returncode == 2 and started.stderr.count("\n") == 1 and "Traceback" not in started.stderr
    assert "channels.telegram.accounts.Work: an account name is lowercase letters" in started.stderr

    config = (daemon.home / "config.toml").read_text().replace("accounts.Work]", "accounts.work]")
    (daemon.home / "config.toml").write_text(config.replace(f'token = "{WORK_TOKEN}"', 'dm_policy = "allowlist"'))
    started = daemon.cli("gateway", timeout=60)  # no token of its own: it would be the default's bot again
    assert started.returncode == 2 and started.stderr.count("\n") == 1 and "Traceback" not in started.stderr
    assert "channels.telegram.accounts.work names the same telegram account as channels.telegram" in started.stderr
    assert HOME_TOKEN not in started.stderr


@pytest.mark.parametrize(("raw", "expected"), [
    ("{bad", "CLAWGATE_CHANNELS__SLACK__ACCOUNTS=<secret, not shown> is not valid JSON"),
    ('{"work": 5}', "CLAWGATE_CHANNELS__SLACK__ACCOUNTS must be a table of accounts, each a table in JSON"),
])
def test_accounts_in_bad_json_from_the_environment_are_one_line(tmp_path: Path, raw: str, expected: str) -> None:
    daemon = DaemonProcess(tmp_path / "home", anthropic_url=None, env={"CLAWGATE_CHANNELS__SLACK__ACCOUNTS": raw})
    daemon.init()
    started = daemon.cli("gateway", timeout=60)
    assert started.returncode == 2 and "Traceback" not in started.stderr, started.stderr
    assert started.stderr.count("\n") == 1 and expected in started.stderr


@pytest.fixture
def two_discords() -> Iterator[tuple[FakeDiscord, FakeDiscord]]:
    with FakeDiscord() as first, FakeDiscord() as second:
        yield first, second


def discord_dm_replies(fake: FakeDiscord) -> list[str]:
    dm = fake.dm_channels.get(fake.owner_user["id"])
    return [m["content"] for m in fake.sent_messages(dm) if not m["content"].startswith(("⚙️", "⏳"))] if dm else []


def test_two_discord_bots_in_one_process_each_on_its_own_server(daemon_factory, tmp_path: Path, two_discords,
                                                                fake_model: FakeAnthropic) -> None:
    first, second = two_discords
    shared = {"dm_policy": "open", "retry_base_seconds": 0.05, "guild_ready_timeout_seconds": 0.5,
              "offline_grace_seconds": 2}
    env = {f"CLAWGATE_CHANNELS__DISCORD__{k.upper()}": json.dumps(v) if not isinstance(v, str) else v
           for k, v in shared.items()}
    env.update(CLAWGATE_CHANNELS__DISCORD__TOKEN=first.token, CLAWGATE_CHANNELS__DISCORD__BASE_URL=first.base_url,
               # the second account from the environment too: `__ACCOUNTS__<name>__<key>`
               CLAWGATE_CHANNELS__DISCORD__ACCOUNTS__SECOND__TOKEN=second.token)
    daemon = start_with_config(daemon_factory, tmp_path, env,
                               f'[channels.discord.accounts.second]\nbase_url = "{second.base_url}"\n')
    wait_until(lambda: first.connected() and second.connected(), "both Discord Gateway sessions",
               describe=daemon.log_text)

    fake_model.enqueue(text("from the first bot"))
    first.inject_dm("hi first")
    wait_until(lambda: discord_dm_replies(first) == ["from the first bot"], "the first bot's answer",
               timeout=DEFAULT_TIMEOUT, describe=daemon.log_text)
    fake_model.enqueue(text("from the second bot"))
    second.inject_dm("hi second")
    wait_until(lambda: discord_dm_replies(second) == ["from the second bot"], "the second bot's answer",
               timeout=DEFAULT_TIMEOUT, describe=daemon.log_text)
    assert discord_dm_replies(first) == ["from the first bot"]
    # each client spoke only to its own server, with its own token
    assert {c.headers.get("Authorization") for c in first.calls if c.path == "/users/@me"} == {f"Bot {first.token}"}
    assert {c.headers.get("Authorization") for c in second.calls if c.path == "/users/@me"} == {f"Bot {second.token}"}
    rows = channel_rows(daemon)
    assert rows["discord"]["state"] == rows["discord.second"]["state"] == "running"

    # a slash command's answer (discord.py's interaction webhooks) goes to the server of the bot it was asked of
    for fake in (first, second):
        wait_until(lambda: "tasks" in {c["name"] for c in fake.commands.get(None, [])}, "the commands registered",
                   describe=daemon.log_text)
        ran = fake.run_command("tasks", channel_id=fake.channel_id)
        wait_until(lambda: (fake.interaction(ran["id"]).original_message or {}).get("content"),
                   "the command answered on its own server", describe=daemon.log_text)
        assert "no active tasks" in fake.interaction(ran["id"]).original_message["content"].lower()


def test_pairing_is_the_accounts_own(daemon_factory, tmp_path: Path, home_bot: FakeTelegram, work_bot: FakeTelegram,
                                     fake_model: FakeAnthropic) -> None:
    stranger = 5555
    daemon = start_with_config(daemon_factory, tmp_path, telegram_env(home_bot),
                               f'[channels.telegram.accounts.work]\ntoken = "{WORK_TOKEN}"\n'
                               f'base_url = "{work_bot.base_url}"\ndm_policy = "pairing"\n')
    work_bot.inject_message(stranger, "let me in", username="newbie")
    work_bot.wait_for(lambda: len(replies(work_bot, stranger)) == 1)
    found = re.search(r"\b([A-Z2-9]{8})\b", replies(work_bot, stranger)[0])
    assert found is not None
    code = found.group(1)
    assert "pairing approve telegram.work" in daemon.log_text()  # the owner is told the account's command
    other = daemon.cli("pairing", "approve", "telegram", code)  # the code is the work bot's, not the default's
    assert other.returncode == 1 and "Traceback" not in other.stderr
    approved = daemon.cli("pairing", "approve", "telegram.work", code)
    assert approved.returncode == 0, approved.stderr
    work_bot.wait_for(lambda: any("approved" in t for t in replies(work_bot, stranger)))
    fake_model.enqueue(text("welcome"))
    work_bot.inject_message(stranger, "hello now")
    work_bot.wait_for(lambda: "welcome" in replies(work_bot, stranger))
    bad = daemon.cli("pairing", "approve", "telegram.Work!", code)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "names no account" in bad.stderr
