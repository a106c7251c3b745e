"""The agent's send_file through the real daemon and the fake Bot API: the file arrives as a document
in the chat the run answers, from the sender's own workspace, its stored copy is removed once sent,
and after a SIGKILL while Telegram refused it, the file is delivered exactly once."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fakes.telegram_api import FakeTelegram
from tests.harness import DaemonProcess
from tests.telegram_support import CHAT, replies, telegram, tg_daemon  # noqa: F401
from tests.waiting import wait_until

REPORT = b"month,total\njan,10\nfeb,12\n" * 100


def put(daemon: DaemonProcess, name: str, data: bytes) -> None:
    """A file in the sender's own workspace (CHAT is a guest here: dm_policy open, no owner)."""
    folder = daemon.guest_workspace(f"telegram:{CHAT}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)


def stored(daemon: DaemonProcess) -> list[Path]:
    folder = daemon.home / "state" / "outbox-files"
    return list(folder.iterdir()) if folder.exists() else []


def queued_texts(daemon: DaemonProcess) -> list[str]:
    """The texts of the replies the daemon has durably queued (its outbox, whatever their status)."""
    with sqlite3.connect(f"file:{daemon.home / 'state/clawgate.db'}?mode=ro", uri=True) as db:
        return [json.loads(body).get("text") or "" for (body,) in db.execute("SELECT body FROM outbox")]


def test_send_file_delivers_the_document_to_the_chat_and_forgets_its_copy(tg_daemon, telegram: FakeTelegram,
                                                                         fake_model: FakeAnthropic) -> None:
    daemon = tg_daemon()
    put(daemon, "report.csv", REPORT)
    fake_model.enqueue(tool_use("send_file", {"path": "report.csv", "caption": "The report."}), text("Sent it."))
    telegram.inject_message(CHAT, "send me the report")
    telegram.wait_for(lambda: "Sent it." in replies(telegram, CHAT), timeout=60)
    telegram.wait_for(lambda: len(telegram.documents) == 1, timeout=60)
    [doc] = telegram.documents
    assert (doc["chat_id"], doc["file_name"], doc["content"], doc["caption"]) == (CHAT, "report.csv", REPORT,
                                                                                  "The report.")
    telegram.wait_for(lambda: stored(daemon) == [], timeout=60)


def test_a_file_outside_the_senders_workspace_is_refused_to_the_model(tg_daemon, telegram: FakeTelegram,
                                                                      fake_model: FakeAnthropic) -> None:
    daemon = tg_daemon()
    (daemon.workspace / "owner.txt").write_bytes(b"the owner's")  # not this guest's
    fake_model.enqueue(tool_use("send_file", {"path": "../../workspace/owner.txt"}), text("Could not."))
    telegram.inject_message(CHAT, "send me the owner's file")
    telegram.wait_for(lambda: "Could not." in replies(telegram, CHAT), timeout=60)
    results = [b for m in fake_model.requests[-1]["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert "outside the workspace" in str(results[-1]["content"])
    assert telegram.documents == [] and stored(daemon) == []


def test_after_a_sigkill_the_file_is_delivered_exactly_once(tg_daemon, telegram: FakeTelegram,
                                                           fake_model: FakeAnthropic) -> None:
    daemon = tg_daemon()
    put(daemon, "notes.txt", b"remember the milk\n")
    telegram.fail_next("sendDocument", status=500, times=10_000)  # Telegram is failing: the file stays queued
    fake_model.enqueue(tool_use("send_file", {"path": "notes.txt"}), text("Queued."))
    telegram.inject_message(CHAT, "send me my notes")
    telegram.wait_for(lambda: any(name == "sendDocument" for name, _ in telegram.calls), timeout=60)
    # the run's answer is recorded (the kill is not meant to cut the run itself short: a model answer lost
    # with the process is asked for again) and held behind the file: the chat's replies keep order
    wait_until(lambda: "Queued." in queued_texts(daemon), "the run's answer queued behind the file")
    assert len(stored(daemon)) == 1 and "Queued." not in replies(telegram, CHAT)
    daemon.kill()
    (daemon.guest_workspace(f"telegram:{CHAT}") / "notes.txt").write_bytes(b"changed after sending")
    with telegram._cond:
        telegram._failures.clear()  # Telegram works again
    daemon.start()
    telegram.wait_for(lambda: len(telegram.documents) == 1, timeout=90)
    assert telegram.documents[0]["content"] == b"remember the milk\n"  # the copy taken when it was sent
    telegram.wait_for(lambda: "Queued." in replies(telegram, CHAT), timeout=60)
    telegram.wait_for(lambda: stored(daemon) == [], timeout=60)
    daemon.kill()  # once more, after it was delivered: nothing is sent again
    daemon.start()
    fake_model.enqueue(text("Still here."))
    telegram.inject_message(CHAT, "ping")
    telegram.wait_for(lambda: "Still here." in replies(telegram, CHAT), timeout=60)
    assert len(telegram.documents) == 1
