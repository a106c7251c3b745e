"""Heartbeat decisions with fakes and a fixed clock: idle costs nothing, work is continued in
the owning session, busy sessions and stalled tasks are left alone, HEARTBEAT_OK is dropped."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.core.events import EventHub
from clawgate.agent.session import SessionManager
from clawgate.agent.tasks.store import Step, Task, TaskStore
from clawgate.agent.triggers.heartbeat import ActiveHours, Heartbeat, actionable_lines, is_ack
from clawgate.config.loader import ConfigError
from clawgate.config.schema import HeartbeatSettings
from clawgate.agent.bus import SqliteBus
from clawgate.agent.bus import InboundMessage

TEMPLATE = Path(__file__).resolve().parents[4] / "workspace" / "templates" / "HEARTBEAT.md"
NOON_UTC = datetime(2030, 3, 18, 12, 0, tzinfo=timezone.utc).timestamp()


def test_actionable_lines() -> None:
    text = ("# Heartbeat\n\n<!-- explained\nover lines -->\n## Checks\n- [ ]\n* \n---\n"
            "- check the deploy <!-- inline note -->\nping me if the disk is full\n")
    assert actionable_lines(text) == ["- check the deploy", "ping me if the disk is full"]
    assert actionable_lines("") == [] and actionable_lines(None) == []


def test_the_shipped_template_costs_nothing() -> None:
    assert TEMPLATE.read_text().strip() and actionable_lines(TEMPLATE.read_text()) == []


@pytest.mark.parametrize("reply, ack", [
    ("HEARTBEAT_OK", True), ("**HEARTBEAT_OK**.", True), ("  heartbeat_ok\n", True), ("`HEARTBEAT_OK`", True),
    ("HEARTBEAT_OK — step 2 is done", False), ("Step 2 done.", False), ("", False),
])
def test_is_ack(reply: str, ack: bool) -> None:
    assert is_ack(reply) is ack


def test_active_hours() -> None:
    day = ActiveHours.parse("08:00-22:00", "Europe/Berlin")
    assert day.contains(NOON_UTC)  # 13:00 in Berlin
    assert not day.contains(NOON_UTC + 10 * 3600)  # 23:00 in Berlin
    night = ActiveHours.parse("22:00-06:00", "UTC")
    assert night.contains(NOON_UTC + 11 * 3600) and not night.contains(NOON_UTC)
    assert ActiveHours.parse(None) is None
    with pytest.raises(ValueError, match="08:00-22:00"):
        ActiveHours.parse("8am-10pm")


class Rig:
    def __init__(self, root: Path, **settings: Any) -> None:
        self.workspace = root / "workspace"
        self.workspace.mkdir()
        self.bus = SqliteBus.open(root / "db", fsync=False)
        self.tasks = TaskStore(root / "tasks", fsync=False)
        self.sessions = SessionManager(root / "sessions", fsync=False)
        self.busy: set[str] = set()
        self.events: list[dict[str, Any]] = []
        hub = EventHub()
        hub.subscribe(self.events.append)
        self.now = NOON_UTC
        self.beat = Heartbeat(HeartbeatSettings(**settings), workspace=self.workspace, tasks=self.tasks,
                              sessions=self.sessions, bus=self.bus, events=hub, busy=lambda s: s in self.busy,
                              clock=lambda: self.now)

    def published(self) -> list[InboundMessage]:
        return list(self.bus.unanswered())

    def tick(self) -> dict[str, Any]:
        self.now += 1
        return self.beat.tick()

    def task(self, session: str = "work", status: str = "in_progress") -> Task:
        task = Task(goal="write the report", session_key=session, status=status,  # type: ignore[arg-type]
                    steps=[Step("outline", "done"), Step("draft", "in_progress"), Step("proofread")])
        self.tasks.save(task)
        return task


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


def test_nothing_to_do_publishes_nothing(rig: Rig) -> None:
    (rig.workspace / "HEARTBEAT.md").write_text(TEMPLATE.read_text())
    rig.task(status="pending")
    rig.task(session="done", status="completed")
    for _ in range(100):
        assert rig.tick() == {"status": "idle"}
    assert rig.published() == [] and rig.beat.published == 0


def test_an_in_progress_task_is_continued_in_its_session_and_chat(rig: Rig) -> None:
    rig.sessions.get("work").append("user", text="write the report", inbound_id="in_1", channel="telegram",
                                    chat_id="4242", sender_id="4242")
    task = rig.task()
    assert rig.tick()["sent"] == ["work"]
    (msg,) = rig.published()
    assert (msg.channel, msg.session_key, msg.sender_id) == ("heartbeat", "work", "heartbeat")
    assert msg.metadata["mode"] == "heartbeat" and "model" not in msg.metadata
    assert msg.metadata["deliver"] == {"channel": "telegram", "chat_id": "4242"}
    assert task.status_line() in msg.text and "HEARTBEAT_OK" in msg.text


def test_heartbeat_model_is_requested_when_configured(tmp_path: Path) -> None:
    rig = Rig(tmp_path, model="claude-haiku-4-5")
    rig.task()
    rig.tick()
    assert rig.published()[0].metadata["model"] == "claude-haiku-4-5"


def test_busy_session_is_skipped(rig: Rig) -> None:
    rig.task()
    rig.busy.add("work")
    assert rig.tick() == {"status": "skipped", "sent": [], "skipped": {"work": "session busy"}}
    assert rig.published() == []
    rig.busy.clear()
    assert rig.tick()["sent"] == ["work"]


def test_one_unanswered_heartbeat_at_a_time(rig: Rig) -> None:
    rig.task()
    rig.tick()
    assert rig.tick()["skipped"] == {"work": "previous heartbeat not answered yet"}
    rig.bus.settle(rig.published()[0].id)
    assert rig.tick()["sent"] == ["work"]


def test_a_task_that_does_not_move_is_left_alone_until_it_does(tmp_path: Path) -> None:
    rig = Rig(tmp_path, max_beats_without_progress=2)
    task = rig.task()
    sent = 0
    for _ in range(6):
        result = rig.tick()
        sent += len(result.get("sent", []))
        for msg in rig.published():
            rig.bus.settle(msg.id)
            task.turns += 1  # the run's turns are counted and saved: not progress
            rig.tasks.save(task)
    assert sent == 2 and "no task progress" in result["skipped"]["work"]
    task.steps[1].status = "done"
    rig.tasks.save(task)
    assert rig.tick()["sent"] == ["work"]


def test_heartbeat_file_lines_go_to_the_heartbeat_session(tmp_path: Path) -> None:
    rig = Rig(tmp_path, deliver="telegram:99")
    (rig.workspace / "HEARTBEAT.md").write_text("# HEARTBEAT\n- check the build and tell me if it broke\n")
    assert rig.tick()["sent"] == ["heartbeat"]
    (msg,) = rig.published()
    assert "check the build" in msg.text and msg.metadata["deliver"] == {"channel": "telegram", "chat_id": "99"}


def test_heartbeat_reports_to_any_installed_chat_channel_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    rig = Rig(tmp_path, deliver="slack:C0GENERAL1")
    (rig.workspace / "HEARTBEAT.md").write_text("# HEARTBEAT\n- check the build\n")
    assert rig.tick()["sent"] == ["heartbeat"]
    (msg,) = rig.published()
    assert msg.metadata["deliver"] == {"channel": "slack", "chat_id": "C0GENERAL1"}
    with pytest.raises(ConfigError, match=r"^heartbeat.deliver: .*unknown channel 'fax'"):
        (tmp_path / "other").mkdir()
        Rig(tmp_path / "other", deliver="fax:123")


def test_outside_active_hours_nothing_runs(tmp_path: Path) -> None:
    rig = Rig(tmp_path, active_hours="20:00-23:00", timezone="UTC")
    rig.task()
    assert rig.tick() == {"status": "skipped", "reason": "outside active hours"}
    assert rig.published() == []


def test_reply_filter(rig: Rig) -> None:
    beat = InboundMessage(channel="heartbeat", chat_id="work", sender_id="heartbeat", session_key="work", text="…",
                          metadata={"mode": "heartbeat"})
    chat = InboundMessage(channel="gateway", chat_id="work", sender_id="u", session_key="work", text="hi")
    assert rig.beat.reply_filter(beat, "HEARTBEAT_OK", "reply") is False
    assert rig.beat.reply_filter(beat, "The model is unavailable", "error") is False
    assert rig.beat.reply_filter(beat, "Step 2 is drafted and checked.", "reply") is True
    assert rig.beat.reply_filter(chat, "HEARTBEAT_OK", "reply") is True  # only heartbeat turns are filtered
    assert [e["status"] for e in rig.events] == ["acknowledged", "error", "delivered"]
