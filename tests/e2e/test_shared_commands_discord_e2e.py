"""Commands in a Discord channel the owner and a guest share, through the real daemon, real discord.py and
the fake Discord: a guest's /stop and /new (slash command or text) leave the owner's run and conversation
alone, and every command's answer lands on its own interaction, never on another one pending in the channel."""

from __future__ import annotations

import threading

from tests.e2e.test_discord_e2e import dc_daemon, discord_fake, replies  # noqa: F401
from tests.fakes.anthropic_api import FakeAnthropic, Reply, text
from tests.fakes.discord_api import FakeDiscord
from tests.telegram_support import user_texts
from tests.waiting import DEFAULT_TIMEOUT


def _answer(fake: FakeDiscord, interaction: dict) -> str:
    """The content that replaced the interaction's "thinking…" placeholder."""
    return fake.wait_for(lambda: (fake.interaction(interaction["id"]).original_message or {}).get("content"),
                         timeout=DEFAULT_TIMEOUT)


def test_a_guest_cannot_stop_or_reset_the_owners_channel_and_answers_land_on_their_own_interaction(
        dc_daemon, discord_fake: FakeDiscord, fake_model: FakeAnthropic) -> None:
    daemon = dc_daemon()
    channel, owner, guest = discord_fake.channel_id, discord_fake.owner_user["id"], discord_fake.other_user["id"]
    discord_fake.wait_for(lambda: {"stop", "new", "status"} <= {c["name"] for c in discord_fake.commands.get(None, [])},
                          timeout=DEFAULT_TIMEOUT)
    release = threading.Event()

    def held(body: dict) -> Reply:
        asked = user_texts(body)[-1]
        if "owner's long job" in asked:
            release.wait(DEFAULT_TIMEOUT)
            return text("this answer comes too late")
        return text("echo: " + asked)

    fake_model.responder = held
    discord_fake.inject_guild_message("the owner's long job", user_id=owner, mention_bot=True)
    fake_model.wait_requests(1, timeout=DEFAULT_TIMEOUT)

    # the guest's slash /stop and /new, and a typed "@bot /stop": the owner's run goes on
    assert "someone else's" in _answer(discord_fake, discord_fake.run_command("stop", channel_id=channel, user_id=guest))
    new = discord_fake.run_command("new", channel_id=channel, user_id=guest)
    assert _answer(discord_fake, new).startswith("Only the owner can start this shared conversation")
    typed = discord_fake.inject_guild_message("/stop", user_id=guest, mention_bot=True)
    reply = discord_fake.wait_for(lambda: next((m for m in discord_fake.sent_messages(channel)
                                                if (m.get("message_reference") or {}).get("message_id") == typed["id"]),
                                               None), timeout=DEFAULT_TIMEOUT)
    assert "someone else's" in reply["content"]
    assert not list((daemon.home / "state/sessions").glob("*.archived"))
    assert len(fake_model.requests) == 1  # the run was never stopped and started again

    # two interactions pending in the channel at once: the guest's /status, whose answer Discord holds
    # back with a 429, and the owner's /stop, whose "Stopped." comes meanwhile; each gets its own
    discord_fake.rate_limit(r"/webhooks/.*/messages/@original", method="PATCH", retry_after=2.0)
    status = discord_fake.run_command("status", channel_id=channel, user_id=guest)
    stop = discord_fake.run_command("stop", channel_id=channel, user_id=owner)
    assert _answer(discord_fake, stop) == "Stopped."
    assert "working" in _answer(discord_fake, status) or "idle" in _answer(discord_fake, status)
    release.set()
    assert "this answer comes too late" not in replies(discord_fake, channel)
