"""Which gateway replies are kept in the target session's log: a trigger's answer delivered into
another session (cron job, heartbeat), once however often it is sent; never a reply in its own session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clawgate.agent.bus import OutboundMessage
from clawgate.agent.control import SessionControl
from clawgate.agent.core.statedb import open_state_db
from clawgate.agent.session import SessionManager
from clawgate.channels import gateway_chat
from clawgate.channels.gateway_chat import GatewayChatChannel


class _OneClient:
    def broadcast(self, name: str, payload: dict[str, Any], session: str | None = None) -> int:
        return 1


def _channel(tmp_path: Path) -> tuple[GatewayChatChannel, SessionManager]:
    sessions = SessionManager(tmp_path / "sessions")
    # keep_delivered reads and writes session logs only; the loop and context are not involved.
    control = SessionControl(None, sessions, None)  # type: ignore[arg-type]
    return GatewayChatChannel(_OneClient(), open_state_db(tmp_path / "state.db"), control.keep_delivered), sessions


async def test_heartbeat_and_cron_answers_are_kept_once_in_the_target_only(tmp_path: Path) -> None:
    channel, sessions = _channel(tmp_path)
    beat = OutboundMessage(channel="gateway", chat_id="main", text="All quiet.", session_key="heartbeat",
                           in_reply_to="hb:1", metadata={"heartbeat": {}})
    await channel.send(beat)
    await channel.send(beat)  # sent again after a crash: same number, not kept twice
    own = OutboundMessage(channel="gateway", chat_id="main", text="hello", session_key="main", in_reply_to="gw:1")
    await channel.send(own)
    in_place = OutboundMessage(channel="gateway", chat_id="cron:j", text="done", session_key="cron:j",
                               in_reply_to="cron:j:1", metadata={"cron": {"job": "j", "name": "n", "schedule": "at"}})
    await channel.send(in_place)
    kept = [m for m in sessions.get("main").history() if m.get("from")]
    assert kept == [{"role": "assistant", "text": "All quiet.", "tools": [], "from": {"kind": "heartbeat"}, "seq": 1,
                     "ts": kept[0]["ts"], "runId": "hb:1"}]
    assert [m for m in sessions.get("main").history() if m["role"] != "assistant" or not m.get("from")] == []
    assert not [r for r in sessions.get("cron:j").records if r["kind"] == "delivered"]


async def test_a_webhooks_answer_is_kept_labelled_and_the_model_told_where_it_came_from(tmp_path: Path) -> None:
    from clawgate.agent.session import delivered_note

    channel, sessions = _channel(tmp_path)
    await channel.send(OutboundMessage(channel="gateway", chat_id="main", text="Build failed.", session_key="hooks:ci",
                                       in_reply_to="hook:ci:d-1", metadata={"hook": {"name": "ci", "delivery": "d-1"}}))
    [kept] = [m for m in sessions.get("main").history() if m.get("from")]
    assert kept["from"] == {"kind": "hook", "name": "ci", "delivery": "d-1"} and kept["text"] == "Build failed."
    [record] = [r for r in sessions.get("main").records if r["kind"] == "delivered"]
    assert delivered_note(record).startswith('[runtime] Delivered into this conversation from webhook "ci" (delivery d-1)')


async def test_a_session_keeps_its_latest_replies_for_catching_up(tmp_path: Path, monkeypatch) -> None:
    """Replies beyond KEEP are dropped oldest first, session by session; numbering goes on regardless."""
    monkeypatch.setattr(gateway_chat, "KEEP", 3)
    channel, _ = _channel(tmp_path)
    for n in range(1, 6):
        await channel.send(OutboundMessage(channel="gateway", chat_id="main", text=f"reply {n}", session_key="main",
                                           in_reply_to=f"gw:{n}"))
    await channel.send(OutboundMessage(channel="gateway", chat_id="other", text="there", session_key="other",
                                       in_reply_to="gw:o"))
    seen: list[dict[str, Any]] = []
    assert channel.catch_up("main", 0, lambda payload: seen.append(payload) is None) == 3
    assert [(p["seq"], p["text"]) for p in seen] == [(3, "reply 3"), (4, "reply 4"), (5, "reply 5")]
    assert channel.last_seq("main") == 5 and channel.last_seq("other") == 1
