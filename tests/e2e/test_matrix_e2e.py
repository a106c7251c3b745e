"""The Matrix channel end to end: the real daemon, a real Synapse, and a real matrix-nio client as the person.

Nothing here is a fake except the model: the bot logs in to Synapse, syncs, joins, answers; the
person's client reads what Synapse delivered to it.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import Counter

from tests.harness import DaemonProcess
from tests.fakes.anthropic_api import FakeAnthropic, file_sender, text, tool_use
from tests.matrix_support import Human, humans, log_tail, matrix_bot, mx_daemon  # noqa: F401
from tests.servers.matrix_proxy import MatrixProxy
from tests.telegram_support import user_texts
from tests.waiting import wait_past, wait_until

NOTICE = "m.notice"


def bot_notices(person: Human, room: str, bot: str) -> list[str]:
    return [e.body for e in person.seen(room, bot) if e.content.get("msgtype") == NOTICE]


def test_a_dm_with_a_tool_call_then_a_thread(mx_daemon, matrix_bot, humans, fake_model: FakeAnthropic) -> None:
    daemon = mx_daemon(dm_policy="open", max_file_bytes=2000, typing_interval_seconds=30)
    alice = humans("alice")
    bot = matrix_bot.user.user_id
    room = alice.dm(bot)
    alice.wait(lambda: bot in alice.members(room), "the bot to join the DM", describe=log_tail(daemon))
    fake_model.enqueue(tool_use("list_dir", {"path": "."}), text("I see **nothing much** in `.`"))
    root = alice.send(room, "what is in your workspace?")
    replies = alice.wait(lambda: [e for e in alice.seen(room, bot) if e.content.get("msgtype") == NOTICE
                                  and "nothing much" in e.body], "the bot's answer", describe=log_tail(daemon))
    reply = replies[-1].content
    assert reply["format"] == "org.matrix.custom.html"
    assert "<strong>nothing much</strong>" in reply["formatted_body"] and "<code>.</code>" in reply["formatted_body"]
    assert user_texts(fake_model.requests[0])[-1] == "what is in your workspace?"
    assert any(bot in e.content["user_ids"] for e in alice.seen(room, type="m.typing"))
    alice.wait(lambda: bot not in alice.seen(room, type="m.typing")[-1].content["user_ids"],
               "the typing notice to end with the answer", timeout=20)  # on its own it would last 33 s
    # a thread under the first message is its own conversation, answered in the thread
    alice.send(room, "more on this", thread=root)
    threaded = alice.wait(lambda: [e for e in alice.seen(room, bot) if e.thread == root],
                          "an answer in the thread", describe=log_tail(daemon))
    assert [e.body for e in threaded] == ["echo: more on this"]
    assert threaded[0].content["m.relates_to"]["rel_type"] == "m.thread"
    # files come through the media repository; over max_file_bytes they are refused, even when the
    # event claims a smaller size (the download stops one byte past the limit)
    alice.send_file(room, "notes.txt", b"remember the milk")
    alice.wait(lambda: any("notes.txt" in b for b in bot_notices(alice, room, bot)), "the file's answer",
               describe=log_tail(daemon))
    saved = list(daemon.guest_workspace(f"matrix:{alice.user_id}").glob("inbox/*-notes.txt"))
    assert len(saved) == 1 and saved[0].read_bytes() == b"remember the milk"
    alice.send_file(room, "big.bin", b"x" * 3000, declared=100)
    alice.wait(lambda: any("too large" in b for b in bot_notices(alice, room, bot)), "the refusal of the big file",
               describe=log_tail(daemon))
    assert not list(daemon.home.rglob("*big.bin"))


def test_a_risky_tool_in_a_room_is_approved_by_the_owners_reaction_and_a_cron_result_arrives(
        mx_daemon, matrix_bot, humans, fake_model) -> None:
    alice, mallory = humans("owner"), humans("mallory")
    daemon = mx_daemon(owner=[alice.user_id], group_policy="open")
    bot = matrix_bot.user.user_id
    room = alice.room(bot, mallory.user_id)
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "approved.txt"]}), text("Created approved.txt."))
    alice.wait(lambda: len(alice.members(room)) == 3, "everyone to join", describe=log_tail(daemon))
    alice.send(room, "make a file", mention=bot)
    # the prompt: the status line quotes the call's arguments too, but only the prompt asks for a reaction
    prompt = alice.wait(lambda: [e for e in alice.seen(room, bot) if "touch approved.txt" in e.body
                                 and "👍" in e.body], "the approval prompt", describe=log_tail(daemon))[0]
    assert "Approval needed" in prompt.body and not (daemon.workspace / "approved.txt").exists()
    mallory.react(room, prompt.event_id, "👍")  # in the room, but not the owner
    alice.wait(lambda: any("Only the owner" in b for b in bot_notices(alice, room, bot)),
               "the refusal of mallory's reaction", describe=log_tail(daemon))
    assert not (daemon.workspace / "approved.txt").exists()
    alice.react(room, prompt.event_id, "👍")
    alice.wait(lambda: "Created approved.txt." in bot_notices(alice, room, bot), "the tool's result",
               describe=log_tail(daemon))
    assert (daemon.workspace / "approved.txt").exists()
    # a cron job delivering to the room
    fake_model.enqueue_for("water the plants", text("Time to water the plants 🌱"))
    added = daemon.cli("cron", "add", "--at", "+1s", "--message", "Tell me to water the plants",
                       "--deliver", f"matrix:{room}")
    assert added.returncode == 0, added.stderr
    alice.wait(lambda: any("water the plants" in b for b in bot_notices(alice, room, bot)),
               "the cron job's answer", describe=log_tail(daemon))


def test_kill_during_a_burst_of_50_then_every_message_is_answered_once(
        mx_daemon, matrix_bot, humans, fake_model) -> None:
    """The kill lands while the model is answering 'burst 5' and the rest of the first 20 wait in the inbox.

    Where a kill lands decides what may be asked again: a model call whose answer had not been recorded
    yet is asked again after the restart (the answer never existed for the daemon), and nothing else is.
    The kill is placed in such a call on purpose; at a random moment it sometimes landed in one (then the
    repeated request looked like an extra model call) and sometimes did not."""
    # timeline_limit 10: the restart's first /sync leaves messages out, which the adapter must page back for
    daemon = mx_daemon(dm_policy="open", timeline_limit=10)
    alice = humans("alice")
    bot = matrix_bot.user.user_id
    room = alice.dm(bot)
    alice.send(room, "warm up")
    alice.wait(lambda: bot_notices(alice, room, bot), "the warm-up answer", describe=log_tail(daemon))
    cut = threading.Event()  # the fake sends the first words of the answer to 'burst 5', then waits
    fake_model.enqueue_for("burst 5", text("echo: burst 5", hold=cut))
    sent = [f"burst {i}" for i in range(50)]
    for body in sent[:20]:
        alice.send(room, body)
    wait_until(lambda: "burst 5" in asked_texts(fake_model), "the model to be answering 'burst 5'",
               describe=log_tail(daemon))
    wait_until(lambda: accepted(daemon) == 21, "the first 20 messages in the inbox", describe=log_tail(daemon))
    daemon.kill()
    cut.set()  # the answer's rest goes to a dead connection
    for body in sent[20:]:
        alice.send(room, body)
    daemon.start()
    want = {f"echo: {b}" for b in sent} | {"echo: warm up"}
    alice.wait(lambda: want <= set(bot_notices(alice, room, bot)), "every message of the burst answered",
               timeout=120, describe=log_tail(daemon))
    wait_past(1.0)  # a duplicate would follow within the dispatcher's first retry
    answers = bot_notices(alice, room, bot)
    assert sorted(answers) == sorted(want), [a for a in answers if answers.count(a) > 1]
    # 'burst 5' and the 14 behind it were accepted and unanswered at the kill: processed again on start
    assert any("recovered 15 unanswered message(s)" in line for line in daemon.output), daemon.log_text()
    # one model call per message; the call the kill cut is the one asked again, as the same request
    asked, expected = Counter(asked_texts(fake_model)), Counter(["warm up", *sent, "burst 5"])
    assert asked == expected, {"asked more often": dict(asked - expected), "asked less often": dict(expected - asked)}
    first, again = [r["messages"] for r in fake_model.requests if user_texts(r)[-1] == "burst 5"]
    assert again == first
    # the restart logged in as the same device (its id kept), which is what lets the homeserver recognise a resend
    devices = matrix_bot.devices()
    assert len([d for d in devices if d.get("display_name") == "clawgate"]) == 1, devices


def asked_texts(fake_model: FakeAnthropic) -> list[str]:
    """What the person typed last in each model request: one per model call made for a message."""
    return [user_texts(r)[-1] for r in fake_model.requests]


def accepted(daemon: DaemonProcess) -> int:
    """Messages in the daemon's inbox (accepted, answered or not), read from its state database."""
    db = sqlite3.connect(daemon.home / "state/clawgate.db", timeout=1, isolation_level=None)
    try:
        return int(db.execute("SELECT count(*) FROM inbox").fetchone()[0])
    except sqlite3.OperationalError:  # busy for a moment: ask again
        return -1
    finally:
        db.close()


def test_an_encrypted_dm_is_read_and_answered_encrypted(mx_daemon, matrix_bot, humans, fake_model, tmp_path) -> None:
    alice = humans("alice", store=tmp_path / "alice-keys")  # an E2E client, as Element is
    daemon = mx_daemon(dm_policy="open")
    bot = matrix_bot.user.user_id
    room = alice.encrypted_dm(bot)
    alice.wait(lambda: bot in alice.members(room), "the bot to join the encrypted DM", describe=log_tail(daemon))
    alice.send(room, "a secret question")
    answers = alice.wait(lambda: [e for e in alice.seen(room, bot) if e.body == "echo: a secret question"],
                         "the encrypted answer", describe=log_tail(daemon))
    assert answers[0].encrypted and answers[0].content["msgtype"] == NOTICE
    assert user_texts(fake_model.requests[0])[-1] == "a secret question"
    assert not [e for e in alice.seen(room, bot) if "encrypted" in e.body]  # no "cannot read" notice
    alice.send_file(room, "plan.txt", b"the secret plan")  # uploaded encrypted; the key only in the E2E event
    alice.wait(lambda: any("plan.txt" in e.body for e in alice.seen(room, bot)), "the encrypted file's answer",
               describe=log_tail(daemon))
    saved = list(daemon.guest_workspace(f"matrix:{alice.user_id}").glob("inbox/*-plan.txt"))
    assert len(saved) == 1 and saved[0].read_bytes() == b"the secret plan"
    # killed and started again, the bot is the same device with the same keys: it still reads the room
    daemon.kill()
    daemon.start()
    alice.send(room, "still secret?")
    again = alice.wait(lambda: [e for e in alice.seen(room, bot) if e.body == "echo: still secret?"],
                       "the encrypted answer after a restart", describe=log_tail(daemon))
    assert again[0].encrypted


def test_invites_from_strangers_are_declined_and_an_encrypted_room_is_told_once(
        daemon_factory, matrix_bot, humans, fake_model, tmp_path) -> None:
    """Set up as the README says: an access token from /login, the section in config.toml."""
    friend, stranger = humans("friend"), humans("stranger")
    bot = matrix_bot.user.user_id
    token = matrix_bot.login()
    home = tmp_path / "readme-home"
    DaemonProcess(home, anthropic_url=None).init()
    with open(home / "config.toml", "a") as config:
        config.write(f"""
[channels.matrix]
enabled = true
homeserver = "{matrix_bot.server.base_url}"
user_id = "{bot}"
access_token = "{token}"
dm_policy = "allowlist"
allow_from = ["{friend.user_id}"]
encryption = false
sync_timeout_seconds = 2
""")
    daemon = daemon_factory(home=home, init=False)
    refused = stranger.dm(bot)
    secret = friend.encrypted_dm(bot)
    for n in range(2):
        friend.send_encrypted(secret, n)
    told = friend.wait(lambda: [b for b in bot_notices(friend, secret, bot) if "encrypted" in b],
                       "the bot to say it cannot read encrypted rooms", describe=log_tail(daemon))
    plain = friend.dm(bot)
    friend.send(plain, "and here?")
    friend.wait(lambda: bot_notices(friend, plain, bot) == ["echo: and here?"], "an answer in the plain room",
                describe=log_tail(daemon))
    assert len([b for b in bot_notices(friend, secret, bot) if "encrypted" in b]) == len(told) == 1
    assert all("Ciphertext" not in str(r) for r in fake_model.requests)
    stranger.wait(lambda: any(e.content.get("membership") == "leave" and e.state_key == bot
                              for e in stranger.seen(refused, type="m.room.member")),
                  "the bot to turn the stranger's invite down", describe=log_tail(daemon))
    assert not bot_notices(stranger, refused, bot)
    doctor = daemon.cli("doctor")
    assert "encrypted rooms cannot be read" in doctor.stdout and secret in doctor.stdout, doctor.stdout
    assert token not in daemon.log_text() and token not in doctor.stdout
    row = next(r for r in json.loads(daemon.cli("channels", "--json").stdout) if r["name"] == "matrix")
    assert row["state"] == "running" and row["bot"] == bot, row


def test_send_file_arrives_as_an_m_file_from_the_media_repository(mx_daemon, matrix_bot, humans,
                                                                   fake_model: FakeAnthropic) -> None:
    daemon = mx_daemon(dm_policy="open")
    alice = humans("alice")
    bot = matrix_bot.user.user_id
    room = alice.dm(bot)
    alice.wait(lambda: bot in alice.members(room), "the bot to join the DM", describe=log_tail(daemon))
    folder = daemon.guest_workspace(f"matrix:{alice.user_id}")  # alice is a guest: her own workspace
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plan.md").write_bytes(b"# Plan\n1. ship\n")
    fake_model.enqueue(tool_use("send_file", {"path": "plan.md", "caption": "The plan."}), text("Sent."))
    alice.send(room, "send me the plan")
    [event] = alice.wait(lambda: [e for e in alice.seen(room, bot) if e.content.get("msgtype") == "m.file"],
                         "the file event", describe=log_tail(daemon))
    assert (event.content["filename"], event.content["body"]) == ("plan.md", "The plan.")
    assert event.content["info"] == {"size": 15, "mimetype": "text/markdown"}
    downloaded = alice._run(alice.client.download(event.content["url"]))
    assert downloaded.body == b"# Plan\n1. ship\n"


def test_a_file_synapse_stored_just_before_a_kill_is_not_sent_again(mx_daemon, matrix_bot, humans,
                                                                    fake_model: FakeAnthropic) -> None:
    """Killed after Synapse stored the file's event and before its answer came back (so nothing recorded it
    as sent), the daemon sends it again after the restart, from the same device with the same transaction
    id (derived from the file's send_key): Synapse returns the event it stored instead of a second one."""
    proxy = MatrixProxy(int(matrix_bot.server.base_url.rsplit(":", 1)[1])).start()
    try:
        daemon = mx_daemon(dm_policy="open", homeserver=proxy.base_url)
        alice = humans("alice")
        bot = matrix_bot.user.user_id
        room = alice.dm(bot)
        alice.wait(lambda: bot in alice.members(room), "the bot to join the DM", describe=log_tail(daemon))
        folder = daemon.guest_workspace(f"matrix:{alice.user_id}")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "plan.md").write_bytes(b"# Plan\n1. ship\n")
        fake_model.responder = file_sender("plan.md", "The plan.")
        proxy.hold_send_answers()
        alice.send(room, "send me the plan")

        def files() -> list:
            return [e for e in alice.seen(room, bot) if e.content.get("msgtype") == "m.file"]

        alice.wait(files, "the file's event stored by Synapse", describe=log_tail(daemon))
        daemon.kill()
        proxy.release_send_answers()
        daemon.start()
        alice.wait(lambda: "Sent." in bot_notices(alice, room, bot), "the run's answer after the restart",
                   describe=log_tail(daemon))
        assert sum(b.get("msgtype") == "m.file" for b in proxy.sent_bodies) == 2  # asked for again after the restart
        assert len(files()) == 1
        # the same for a part of a text answer (its own send_key)
        proxy.hold_send_answers()
        alice.send(room, "hello")
        alice.wait(lambda: "echo: hello" in bot_notices(alice, room, bot), "the answer stored by Synapse",
                   describe=log_tail(daemon))
        daemon.kill()
        proxy.release_send_answers()
        daemon.start()
        wait_until(lambda: sum(b.get("body") == "echo: hello" for b in proxy.sent_bodies) == 2,
                   "the answer sent again after the restart", describe=log_tail(daemon))
        alice.send(room, "and now?")  # answered after the resend: once alice sees it, she saw what came before
        alice.wait(lambda: "echo: and now?" in bot_notices(alice, room, bot), "the next answer", describe=log_tail(daemon))
        assert bot_notices(alice, room, bot).count("echo: hello") == 1
    finally:
        proxy.stop()
