"""The Slack channel end to end: the real daemon process, the real slack_sdk, FakeSlack.

Each test injects what a person does in Slack (a DM, a mention, a button press) and reads what
the bot really posted through the Web API.
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.anthropic_api import FakeAnthropic, Reply, text, tool_use
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_api import workspace as W
from tests.harness import free_port
from tests.slack_support import GUEST, NO_PROXY, replies, signing_secret, slack, slack_daemon  # noqa: F401
from tests.waiting import wait_until


def test_dm_conversation_in_mrkdwn(slack_daemon, slack: FakeSlack, fake_model: FakeAnthropic) -> None:
    slack_daemon()
    fake_model.enqueue(text("Hello **there**: `a < b` & [docs](https://example.org)"))
    env = slack.send_message("hi bot")
    slack.wait_for(lambda f: replies(f, W.OWNER_DM), timeout=60)
    (reply,) = replies(slack, W.OWNER_DM)
    assert reply == "Hello *there*: `a &lt; b` &amp; <https://example.org|docs>"
    assert env.acked and "hi bot" in str(fake_model.requests[0]["messages"])
    (post,) = [c for c in slack.calls_to("chat.postMessage") if c.ok]
    assert "thread_ts" not in post.params or not post.params["thread_ts"]  # a DM is answered in the DM


def test_channel_mention_is_answered_in_its_thread_and_the_thread_goes_on(slack_daemon, slack, fake_model) -> None:
    slack_daemon()
    fake_model.enqueue(text("first answer"), text("second answer"))
    env = slack.send_mention("what's up?", also_message_event=True)
    slack.wait_for(lambda f: replies(f, W.GENERAL), timeout=60)
    ts = env.payload["event"]["ts"]
    (reply,) = slack.posted(W.GENERAL)
    assert (reply["text"], reply["thread_ts"]) == ("first answer", ts)
    slack.send_message("no mention here", channel=W.GENERAL)  # not addressed: ignored
    slack.send_mention("and then?", thread_ts=ts)
    slack.wait_for(lambda f: len(replies(f, W.GENERAL)) == 2, timeout=60)
    assert [m["thread_ts"] for m in slack.posted(W.GENERAL)] == [ts, ts]
    assert len(fake_model.requests) == 2  # the twin message event and the unaddressed post cost nothing
    assert "first answer" in str(fake_model.requests[1]["messages"])  # the thread is one session


def test_multi_step_task_shows_progress_edited_in_place(slack_daemon, slack, fake_model) -> None:
    daemon = slack_daemon(progress_interval_seconds=0)
    (daemon.workspace / "notes.txt").write_text("hello")

    def status_posts(f: FakeSlack) -> list[Any]:
        return [c for c in f.calls_to("chat.postMessage") if c.ok and str(c.params.get("text", "")).startswith("⚙️")]

    def edited_to(f: FakeSlack, step: str) -> bool:
        return any(step in str(c.params.get("text")) for c in f.calls_to("chat.update") if c.ok)

    def steps(body: dict) -> Reply:  # each step is taken once the previous one is on screen: no race with a clock
        if len(fake_model.requests) == 2:
            slack.wait_for(lambda f: status_posts(f), timeout=60)
            return tool_use("read_file", {"path": "notes.txt"})
        slack.wait_for(lambda f: edited_to(f, "read_file"), timeout=60)
        return text("notes.txt says hello")

    fake_model.enqueue(tool_use("list_dir", {"path": "."}))
    fake_model.responder = steps
    slack.send_message("look around")
    slack.wait_for(lambda f: "notes.txt says hello" in replies(f, W.OWNER_DM), timeout=60)
    (status,) = status_posts(slack)
    assert "list_dir" in status.params["text"]
    status_ts = status.response["ts"]
    assert all(c.params["ts"] == status_ts for c in slack.calls_to("chat.update"))  # one message, edited
    slack.wait_for(lambda f: any(m["ts"] == status_ts for m in f.workspace.deleted), timeout=60)
    assert replies(slack, W.OWNER_DM) == ["notes.txt says hello"]


def test_risky_tool_approved_by_the_owners_button_only(slack_daemon, slack, fake_model) -> None:
    daemon = slack_daemon()
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "approved.txt"]}), text("Created approved.txt."))
    slack.send_message("make the file")
    prompt = slack.wait_for(lambda f: next((m for m in f.posted(W.OWNER_DM) if m.get("blocks")), None), timeout=60)
    assert "touch approved.txt" in prompt["text"] and not (daemon.workspace / "approved.txt").exists()
    guest = slack.press_button(prompt["ts"], "clawgate_approve", user=GUEST)
    slack.wait_for(lambda f: guest.acked and f.responses, timeout=60)
    assert "Only the owner" in slack.responses[0][1]["text"] and slack.responses[0][1]["response_type"] == "ephemeral"
    assert not (daemon.workspace / "approved.txt").exists()
    owner = slack.press_button(prompt["ts"], "clawgate_approve")
    slack.wait_for(lambda f: "Created approved.txt." in replies(f, W.OWNER_DM), timeout=60)
    assert owner.acked and (daemon.workspace / "approved.txt").exists()
    settled = next(m for m in slack.posted(W.OWNER_DM) if m["ts"] == prompt["ts"])
    assert not settled.get("blocks") and "Approved" in settled["text"]  # the buttons are gone


def test_cron_job_result_arrives_in_the_dm(slack_daemon, slack, fake_model) -> None:
    daemon = slack_daemon()
    fake_model.enqueue_for("water the plants", text("Time to water the plants 🌱"))
    added = daemon.cli("cron", "add", "--at", "+1s", "--message", "Tell me to water the plants",
                       "--deliver", f"slack:{W.OWNER_DM}")
    assert added.returncode == 0, added.stderr
    slack.wait_for(lambda f: any("water the plants" in r for r in replies(f, W.OWNER_DM)), timeout=60)


def test_slash_command_and_a_lost_ack_answered_once(slack_daemon, slack, fake_model) -> None:
    slack_daemon()
    fake_model.enqueue(text("only once"))
    slack.socket.lose_acks(1)  # the daemon's acknowledgement is lost: Slack sends the event again
    env = slack.send_message("say it once")
    deliveries = slack.wait_for(lambda f: (e := f.envelopes_for(env.event_id)) and e[-1].acked and len(e) == 2 and e,
                                timeout=60)
    assert deliveries[1].retry_attempt == 1
    slack.wait_for(lambda f: replies(f, W.OWNER_DM) == ["only once"], timeout=60)
    cmd = slack.slash_command("/clawgate", "status")
    slack.wait_for(lambda f: cmd.acked and len(replies(f, W.OWNER_DM)) == 2, timeout=60)
    assert "idle" in replies(slack, W.OWNER_DM)[1]
    assert len(fake_model.requests) == 1


def test_http_mode_refuses_a_bad_signature_and_answers_a_good_one(slack_daemon, slack, fake_model) -> None:
    port = free_port()
    daemon = slack_daemon(mode="http", app_token="", signing_secret=signing_secret(), http_port=port)
    url = f"http://127.0.0.1:{port}/slack/events"
    body = slack.event_body({"type": "message", "channel_type": "im", "channel": W.OWNER_DM, "user": W.OWNER_ID,
                             "text": "over http", "ts": "1700000000.000001", "event_ts": "1700000000.000001"})
    wait_until(lambda: f"events accepted at {url}" in daemon.log_text(), "the daemon's Slack events server",
               describe=daemon.log_text)
    status, answer = slack.post_signed_sync(url, slack.url_verification_body("c-1"))
    assert (status, answer) == (200, '{"challenge": "c-1"}')
    assert slack.post_signed_sync(url, body, secret="wrong-secret")[0] == 401
    assert slack.post_signed_sync(url, body, tamper=True)[0] == 401
    fake_model.enqueue(text("heard you over http"))
    assert slack.post_signed_sync(url, body)[0] == 200
    slack.wait_for(lambda f: replies(f, W.OWNER_DM) == ["heard you over http"], timeout=60)
    assert len(fake_model.requests) == 1 and "over http" in str(fake_model.requests[0]["messages"])


def test_bad_token_is_one_line_and_the_daemon_keeps_serving(slack: FakeSlack, daemon_factory, fake_model) -> None:
    daemon = daemon_factory({**NO_PROXY, "CLAWGATE_CHANNELS__SLACK__ENABLED": "true",
                             "CLAWGATE_CHANNELS__SLACK__BOT_TOKEN": "xoxb-revoked-0000",
                             "CLAWGATE_CHANNELS__SLACK__APP_TOKEN": "xapp-1-x",
                             "CLAWGATE_CHANNELS__SLACK__BASE_URL": slack.api_url})
    wait_until(lambda: "Slack refused the bot token (invalid_auth)" in daemon.log_text(), "the one-line error",
               describe=daemon.log_text)
    log = daemon.log_text()
    assert "xoxb-revoked-0000" not in log and "Traceback" not in log
    fake_model.enqueue(text("still here"))
    answer = daemon.cli("chat", "-m", "are you there?", timeout=60)
    assert answer.returncode == 0 and "still here" in answer.stdout
    assert not slack.socket.open_connections() and not slack.calls_to("apps.connections.open")
    (row,) = [r for r in json.loads(daemon.cli("channels", "--json").stdout) if r["name"] == "slack"]
    assert row["state"] == "failed" and "bot_token" in row["reason"]


def test_a_shared_file_lands_in_the_owners_inbox(slack_daemon, slack, fake_model) -> None:
    daemon = slack_daemon(max_file_bytes=1000)
    fake_model.enqueue(text("got the file"))
    slack.send_file("notes.txt", b"remember the milk\n", text="keep this")
    slack.wait_for(lambda f: "got the file" in replies(f, W.OWNER_DM), timeout=60)
    saved = wait_until(lambda: [p for p in (daemon.workspace / "inbox").rglob("*notes*")], "the saved file")
    assert [p.read_bytes() for p in saved] == [b"remember the milk\n"]
    assert "notes.txt" in str(fake_model.requests[0]["messages"])
    assert all(auth.startswith("Bearer xoxb-") for _, auth in slack.file_fetches)
    slack.send_file("big.bin", b"x" * 5000, mimetype="application/octet-stream")  # over max_file_bytes
    slack.wait_for(lambda f: len(replies(f, W.OWNER_DM)) >= 2, timeout=60)
    assert not list((daemon.workspace / "inbox").rglob("*big*"))
    assert len(slack.file_fetches) == 1  # refused by its announced size, never downloaded
    assert "too large" in replies(slack, W.OWNER_DM)[1] and len(fake_model.requests) == 1


def test_send_file_is_uploaded_and_shared_in_the_dm(slack_daemon, slack: FakeSlack, fake_model: FakeAnthropic) -> None:
    daemon = slack_daemon()
    (daemon.workspace / "summary.txt").write_bytes(b"the summary\n" * 50)
    fake_model.enqueue(tool_use("send_file", {"path": "summary.txt", "caption": "Here it is."}), text("Sent."))
    slack.send_message("send me the summary")
    slack.wait_for(lambda f: "Sent." in replies(f, W.OWNER_DM), timeout=60)
    [(file_id, data)] = slack.uploads
    assert data == b"the summary\n" * 50
    [shared] = [m for m in slack.workspace.messages if m.get("upload")]
    assert shared["channel"] == W.OWNER_DM and shared["files"] == [file_id] and shared["text"] == "Here it is."
    assert slack.workspace.files[file_id]["completed"] and slack.workspace.files[file_id]["name"] == "summary.txt"
