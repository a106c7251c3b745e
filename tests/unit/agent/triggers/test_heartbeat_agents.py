"""Where another agent's heartbeat news goes (`[agents.<id>] heartbeat_deliver`), decided with a real
session store and bus: "last" is the chat the agent's owner last talked to it from (never a guest's,
never another agent's), an explicit target is used as given, "none" keeps the reply in the history, and
a target that cannot be one is refused at start in one line naming the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawgate.agent.bus import SqliteBus
from clawgate.agent.core.events import EventHub
from clawgate.agent.session import SessionManager
from clawgate.agent.tasks.store import TaskStore
from clawgate.agent.triggers.heartbeat import Heartbeat
from clawgate.config.loader import ConfigError
from clawgate.config.schema import HeartbeatSettings

WORK_BEAT = "agent:work:heartbeat"


def _heartbeat(root: Path, target: str) -> Heartbeat:
    work = root / "work"
    work.mkdir(exist_ok=True)
    (work / "HEARTBEAT.md").write_text("- water the plants\n")
    return Heartbeat(HeartbeatSettings(), workspace=root, tasks=TaskStore(root / "tasks", fsync=False),
                     sessions=SessionManager(root / "sessions", fsync=False),
                     bus=SqliteBus.open(root / "db", fsync=False),
                     events=EventHub(), busy=lambda s: False, agents={WORK_BEAT: work},
                     agent_deliver={WORK_BEAT: ("agents.work.heartbeat_deliver", target)})


def _said(beat: Heartbeat, key: str, chat: str, *, owner: bool) -> None:
    channel = key.split(":")[-2]
    beat.sessions.get(key).append("user", text="hi", inbound_id=f"in-{key}", channel=channel, chat_id=chat,
                                  sender_id=chat, owner=owner)


def _deliver(beat: Heartbeat) -> object:
    beat.tick()
    (msg,) = [m for m in beat.bus.unanswered() if m.session_key == WORK_BEAT]
    return msg.metadata["deliver"]


def test_last_is_the_owners_last_chat_of_the_agent(tmp_path: Path) -> None:
    beat = _heartbeat(tmp_path, "last")
    _said(beat, "agent:work:telegram.work:61", "61", owner=True)
    _said(beat, "agent:work:telegram.work:62", "62", owner=False)  # a guest, later
    _said(beat, "telegram:63", "63", owner=True)  # the default agent's owner, later still
    assert _deliver(beat) == {"channel": "telegram.work", "chat_id": "61"}


def test_last_without_an_owners_chat_keeps_the_news_in_the_history(tmp_path: Path) -> None:
    beat = _heartbeat(tmp_path, "last")
    _said(beat, "agent:work:telegram.work:62", "62", owner=False)
    assert _deliver(beat) is None


@pytest.mark.parametrize("target, expected", [("telegram.work:6300", {"channel": "telegram.work", "chat_id": "6300"}),
                                              ("none", None)])
def test_an_explicit_target_or_none(tmp_path: Path, target: str, expected: object) -> None:
    beat = _heartbeat(tmp_path, target)
    _said(beat, "agent:work:telegram.work:61", "61", owner=True)
    assert _deliver(beat) == expected


def test_a_bad_target_is_refused_at_start_naming_the_setting(tmp_path: Path) -> None:
    refused = r"^agents\.work\.heartbeat_deliver: invalid delivery target 'pigeon:1'"
    with pytest.raises(ConfigError, match=refused) as err:
        _heartbeat(tmp_path, "pigeon:1")
    assert "\n" not in str(err.value)
