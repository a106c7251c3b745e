"""Each agent's cron jobs and heartbeat, end to end through the real daemon: a job added for agent `work`
(`clawgate cron add --agent work`, or the cron tool in one of work's runs) runs in work's session and
workspace and is listed as work's; a run of the default agent neither sees nor removes it; work's
HEARTBEAT.md drives work's own heartbeat session, in its workspace."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.fakes.anthropic_api import FakeAnthropic, last_user_text, text, tool_use
from tests.fakes.anthropic.request_text import tool_results
from tests.harness import DaemonProcess
from tests.waiting import wait_until

AGENTS = json.dumps({"home": {"default": True}, "work": {}})


def system_text(body: dict[str, Any]) -> str:
    return "\n".join(block.get("text", "") for block in body.get("system") or [])


async def test_a_cron_job_of_an_agent_runs_in_its_session_and_workspace_and_stays_its_own(
        daemon_factory: Callable[..., DaemonProcess], fake_model: FakeAnthropic) -> None:
    daemon = daemon_factory({"CLAWGATE_AGENTS": AGENTS})
    work_space = daemon.home / "agents" / "work" / "workspace"

    unknown = daemon.cli("cron", "add", "--agent", "nope", "--every", "1h", "-m", "x")
    assert unknown.returncode != 0 and "no agent 'nope'; this daemon has: home, work" in unknown.stderr + unknown.stdout
    assert "Traceback" not in unknown.stderr

    added = daemon.cli("cron", "add", "--agent", "work", "--every", "1h", "-m", "write the cron note", "--json")
    assert added.returncode == 0, added.stderr
    job = json.loads(added.stdout)
    assert job["agent"] == "work" and job["session"] == f"agent:work:cron:{job['id']}"
    listed = daemon.cli("cron", "list")
    row = next(line for line in listed.stdout.splitlines() if line.startswith(job["id"]))
    assert row.split()[1] == "work", listed.stdout

    fake_model.enqueue(tool_use("write_file", {"path": "cron.txt", "content": "from cron"}), text("cron done"))
    assert daemon.cli("cron", "run", job["id"]).returncode == 0
    wait_until(lambda: (work_space / "cron.txt").exists(), "the job's file in work's workspace", describe=daemon.log_text)
    assert not (daemon.workspace / "cron.txt").exists()
    wait_until(lambda: [r["status"] for r in json.loads(daemon.cli("cron", "runs", job["id"], "--json").stdout)] == ["ok"],
               "the run recorded as ok", describe=daemon.log_text)
    assert (daemon.home / "state" / "sessions" / f"agent%3Awork%3Acron%3A{job['id']}.jsonl").exists()

    async with daemon.client() as client:
        # the cron tool in a run of work makes a job of work
        fake_model.enqueue(tool_use("cron", {"action": "add", "every": "2h", "message": "tool-made job"}),
                           text("scheduled"))
        assert (await client.chat("schedule it", session="main", agent="work"))["text"] == "scheduled"
        jobs = {j["message"]: j for j in (await client.request("cron.list", {}))["jobs"]}
        assert jobs["tool-made job"]["agent"] == "work"
        assert jobs["tool-made job"]["session"].startswith("agent:work:cron:")
        # a run of home lists none of work's jobs and cannot remove one
        fake_model.enqueue(tool_use("cron", {"action": "list"}),
                           tool_use("cron", {"action": "remove", "id": job["id"]}), text("looked"))
        assert (await client.chat("what is scheduled", session="main"))["text"] == "looked"
        listing, removal = tool_results(fake_model.requests[-1:])
        assert listing.strip() == "no cron jobs", listing
        assert "no cron job" in removal and job["id"] in removal, removal
        # work's own run sees both
        fake_model.enqueue(tool_use("cron", {"action": "list"}), text("listed"))
        assert (await client.chat("what is scheduled", session="main", agent="work"))["text"] == "listed"
        work_listing = tool_results(fake_model.requests[-1:])[-1]
        assert "write the cron note" in work_listing and "tool-made job" in work_listing
    assert job["id"] in {j["id"] for j in json.loads(daemon.cli("cron", "list", "--json").stdout)}


async def test_each_agents_heartbeat_md_drives_its_own_heartbeat_session(
        daemon_factory: Callable[..., DaemonProcess], fake_model: FakeAnthropic) -> None:
    fake_model.responder = lambda body: text("HEARTBEAT_OK")
    daemon = daemon_factory({"CLAWGATE_AGENTS": AGENTS, "CLAWGATE_HEARTBEAT__INTERVAL_SECONDS": "0.2"})
    work_space = daemon.home / "agents" / "work" / "workspace"
    (work_space / "HEARTBEAT.md").write_text("# Checks\n- water the office plants\n")

    def beats() -> list[dict[str, Any]]:
        return [r for r in fake_model.requests if "[heartbeat]" in last_user_text(r)]
    wait_until(lambda: beats(), "a heartbeat turn", describe=daemon.log_text)
    beat = beats()[0]
    assert "water the office plants" in last_user_text(beat)
    assert str(work_space) in system_text(beat)
    assert str(daemon.workspace) + "\n" not in system_text(beat) and str(daemon.workspace) + " " not in system_text(beat)
    sessions = daemon.home / "state" / "sessions"
    assert (sessions / "agent%3Awork%3Aheartbeat.jsonl").exists()
    assert not (sessions / "heartbeat.jsonl").exists()  # home's HEARTBEAT.md asks nothing: no beat of home

    # home's checklist drives home's session, with its own items only
    (daemon.workspace / "HEARTBEAT.md").write_text("- tidy the kitchen list\n")
    wait_until(lambda: any("tidy the kitchen" in last_user_text(r) for r in beats()), "home's heartbeat turn",
               describe=daemon.log_text)
    home_beat = next(r for r in beats() if "tidy the kitchen" in last_user_text(r))
    assert "office plants" not in last_user_text(home_beat)
    assert str(work_space) not in system_text(home_beat)
    assert (sessions / "heartbeat.jsonl").exists()
    assert not any("tidy the kitchen" in last_user_text(r) and "office plants" in last_user_text(r) for r in beats())


async def test_an_agents_daily_tokens_are_counted_for_its_sessions_alone(
        daemon_factory: Callable[..., DaemonProcess], fake_model: FakeAnthropic) -> None:
    agents = {"home": {"default": True}, "work": {"daily_tokens": 1000}}
    daemon = daemon_factory({"CLAWGATE_AGENTS": json.dumps(agents)})
    fake_model.enqueue(text("a long answer", input_tokens=600, output_tokens=500))
    async with daemon.client() as client:
        assert (await client.chat("work hard", session="main", agent="work"))["text"] == "a long answer"
        before = len(fake_model.requests)
        refused = await client.chat("once more", session="other", agent="work")
        assert "daily token budget" in refused["text"] and "1100 of 1000" in refused["text"], refused
        assert "agents.work.daily_tokens" in refused["text"]
        assert len(fake_model.requests) == before  # refused before any model call
        # the default agent has no budget of its own: it answers, and does not spend work's
        assert (await client.chat("hello home", session="main"))["text"] == "echo: hello home"
    # the count is the ledger's, kept across a restart
    daemon.terminate()
    daemon.start()
    async with daemon.client() as client:
        again = await client.chat("after the restart", session="main", agent="work")
        assert "daily token budget" in again["text"], again
        assert (await client.chat("home again", session="main"))["text"] == "echo: home again"
