"""A home made before agents existed keeps working once [agents.*] is added: its workspace, sessions,
waiting inbox messages and cron jobs are the default agent's, under the keys they had (nothing migrates)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

from tests.fakes.anthropic_api import FakeAnthropic
from tests.harness import DaemonProcess
from tests.waiting import wait_until

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "statedb" / "schema4.sql"


def _session_texts(home: Path, key: str) -> list[str]:
    log = home / "state" / "sessions" / f"{key.replace(':', '%3A')}.jsonl"
    if not log.exists():
        return []
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [r.get("text") or "".join(b.get("text", "") for b in r.get("content") or [] if isinstance(b, dict))
            for r in records if r.get("kind") in ("user", "assistant")]


async def test_a_single_agent_home_becomes_the_default_agents_with_nothing_to_do(
        daemon_factory: Callable[..., DaemonProcess], fake_model: FakeAnthropic) -> None:
    daemon = daemon_factory()  # today's schema: no [agents.*]
    (daemon.workspace / "SOUL.md").write_text("I am the house assistant.")
    async with daemon.client() as client:
        assert (await client.chat("remember the blue door", session="main"))["text"] == "echo: remember the blue door"
    daemon.terminate()
    # the state database as the previous release wrote it: a message still waiting, cron jobs, a delivered reply
    (daemon.home / "state" / "clawgate.db").unlink()
    for leftover in (daemon.home / "state").glob("clawgate.db-*"):
        leftover.unlink()
    with sqlite3.connect(daemon.home / "state" / "clawgate.db") as db:
        db.executescript(FIXTURE.read_text())
    daemon.env["CLAWGATE_AGENTS"] = json.dumps({"home": {"default": True}, "work": {}})
    await asyncio.to_thread(daemon.start)

    wait_until(lambda: "echo: still waiting" in _session_texts(daemon.home, "telegram:4242"),
               "the message left waiting by the old home, answered in its own session", describe=daemon.log_text)
    async with daemon.client() as client:
        again = await client.chat("which door?", session="main")
        assert again["text"] == "echo: which door?"
        fresh = await client.chat("which door?", session="main", agent="work")
        sessions = {row["key"]: row["agent"] for row in (await client.request("sessions.list"))["sessions"]}
        jobs = await client.request("cron.list")
    house_prompt = json.dumps(fake_model.requests[-2]["system"])
    assert "I am the house assistant." in house_prompt  # the default agent's workspace is the old one
    assert "remember the blue door" in json.dumps(fake_model.requests[-2]["messages"])  # its history continues
    assert "remember the blue door" not in json.dumps(fake_model.requests[-1]["messages"])  # work's is its own
    assert fresh["text"] == "echo: which door?"
    assert sessions["main"] == "home" and sessions["telegram:4242"] == "home" and sessions["agent:work:main"] == "work"
    assert sorted(job["session"] for job in jobs["jobs"]) == ["cron:8ceb6458", "gateway:main"]  # kept as they were
