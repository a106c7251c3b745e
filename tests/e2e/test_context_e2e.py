"""Context engineering end to end: the real daemon, its WebSocket, the fake Messages API."""

from __future__ import annotations

import json

from tests.fakes.anthropic_api import Reply, _echo, error, text, tool_use


def _is_summary(body: dict) -> bool:
    return any("consolidate the older part" in b.get("text", "") for b in body.get("system", []))


def _chat_requests(fake) -> list[dict]:
    return [b for b in fake.requests if not _is_summary(b)]


async def test_thirty_turns_are_byte_identical_extensions(daemon, fake_model):
    notes = daemon.workspace / "notes.txt"
    notes.write_text("alpha\nbeta\n")
    async with daemon.client() as client:
        for turn in range(30):
            if turn % 3 == 1:
                fake_model.enqueue(tool_use("read_file", {"path": "notes.txt"}), text(f"read it ({turn})"))
            elif turn % 3 == 2:
                fake_model.enqueue(tool_use("list_dir", {"path": "."}), text(f"listed ({turn})"))
            final = await client.chat(f"turn {turn}", session="steady")
            assert final["state"] == "final"
    bodies = fake_model.requests
    assert len(bodies) == 30 + 20
    first = bodies[0]
    # layer order and breakpoints on the wire
    system = [b["text"] for b in first["system"]]
    assert system[0].startswith("You are a personal agent running inside clawgate")
    assert system[1].startswith("# SOUL.md") and "# AGENTS.md" in system[1]
    assert system[2].startswith("# USER.md") and "# TOOLS.md" in system[2]
    assert system[3].startswith("# MEMORY.md") and system[4].startswith("# Skills")
    assert [i for i, b in enumerate(first["system"]) if "cache_control" in b] == [4]
    assert [i for i, t in enumerate(first["tools"]) if "cache_control" in t] == [len(first["tools"]) - 1]
    assert first["cache_control"] == {"type": "ephemeral"}
    for previous, current in zip(bodies, bodies[1:]):
        assert current["system"] == previous["system"]
        assert current["tools"] == previous["tools"]
        assert current["messages"][: len(previous["messages"])] == previous["messages"]
        assert len(current["messages"]) > len(previous["messages"])


async def test_restatement_absent_at_turn_20_present_from_21(daemon, fake_model):
    goal = "tidy the notes folder"
    script = [tool_use("task", {"action": "plan", "goal": goal, "steps": ["list the notes", "report"]})]
    script += [tool_use("list_dir", {"path": "."}) for _ in range(23)]
    fake_model.enqueue(*script, text("all tidy"))
    async with daemon.client() as client:
        final = await client.chat("please tidy my notes", session="main")
    assert final["text"] == "all tidy"
    tasks = [json.loads(p.read_text()) for p in (daemon.home / "state/tasks").glob("t_*.json")]
    assert len(tasks) == 1 and tasks[0]["turns"] >= 22
    line = f"I am Claw. Current task: {goal}. Step 1/2. Next: list the notes."

    def last_texts(body: dict) -> str:
        return " ".join(b.get("text", "") for b in body["messages"][-1]["content"] if b.get("type") == "text")

    bodies = fake_model.requests
    # request k is sent after k-1 counted model turns of the task (the plan call created it)
    assert all(line not in last_texts(b) for b in bodies[:22])
    assert line not in json.dumps(bodies[21])  # turn 20: absent everywhere
    assert all(line in last_texts(b) for b in bodies[22:])  # from turn 21 on, in every request
    for previous, current in zip(bodies, bodies[1:]):
        assert current["messages"][: len(previous["messages"])] == previous["messages"]


async def test_consolidation_end_to_end(daemon_factory, fake_model):
    def responder(body: dict) -> Reply:
        if _is_summary(body):
            return text("- The user keeps project notes; deploy target https://deploy.example.com:8443 (commit 3f9a1c2b7d).")
        return _echo(body)

    fake_model.responder = responder
    daemon = daemon_factory({"CLAWGATE_AGENT__CONTEXT_TOKENS": "1000"})
    async with daemon.client() as client:
        await client.chat("deploy commit 3f9a1c2b7d to https://deploy.example.com:8443 please", session="main")
        for turn in range(12):
            await client.chat(f"message number {turn} with some words to fill the window", session="main")
    summaries = [b for b in fake_model.requests if _is_summary(b)]
    assert summaries, "the window passed 50% of the budget, a summary was due"
    records = [json.loads(line) for line in (daemon.home / "state/sessions/main.jsonl").read_text().splitlines()]
    consolidated = [r for r in records if r["kind"] == "consolidated"]
    assert consolidated and all(r["ok"] for r in consolidated)
    # transcript intact: every user message is still on disk
    users = [r["text"] for r in records if r["kind"] == "user"]
    assert users[0].startswith("deploy commit") and len(users) == 13
    # memory has the summary, identifiers verbatim
    logs = "".join(p.read_text() for p in (daemon.workspace / "memory").glob("*.md"))
    assert "https://deploy.example.com:8443" in logs and "3f9a1c2b7d" in logs
    # the next request starts with the pointer block and leaves the early part out
    last = _chat_requests(fake_model)[-1]
    head = last["messages"][0]["content"][0]["text"]
    assert head.startswith("[memory] The earlier part of this conversation (sessions/main.jsonl, up to seq")
    assert "deploy commit 3f9a1c2b7d to" not in json.dumps(last["messages"])
    assert len(last["messages"]) < 2 * 13 - 1


async def test_consolidation_with_a_failing_model_archives_and_loses_nothing(daemon_factory, fake_model):
    def responder(body: dict) -> Reply:
        return error(400, message="no summaries today") if _is_summary(body) else _echo(body)

    fake_model.responder = responder
    daemon = daemon_factory({"CLAWGATE_AGENT__CONTEXT_TOKENS": "1000"})
    async with daemon.client() as client:
        for turn in range(10):
            final = await client.chat(f"remember item {turn}: the key is k{turn}x{turn}", session="main")
            assert final["state"] == "final"
    records = [json.loads(line) for line in (daemon.home / "state/sessions/main.jsonl").read_text().splitlines()]
    failed = [r for r in records if r["kind"] == "consolidated"]
    assert failed and not failed[0]["ok"] and "no summaries today" in failed[0]["error"]
    archived = (daemon.workspace / failed[0]["archive"]).read_text()
    assert "remember item 0: the key is k0x0" in archived and "echo: remember item 0" in archived
    head = _chat_requests(fake_model)[-1]["messages"][0]["content"][0]["text"]
    assert failed[-1]["archive"] in head and "could not be summarised" in head
    assert len([r for r in records if r["kind"] == "user"]) == 10


async def test_memory_fact_reaches_the_next_session_prompt(daemon, fake_model):
    fake_model.enqueue(tool_use("memory_append", {"text": "The user's cat is called Miso"}), text("noted"))
    async with daemon.client() as client:
        await client.chat("my cat is called Miso, remember that", session="a")
        await client.chat("hello again", session="b")
    assert "- The user's cat is called Miso" in (daemon.workspace / "MEMORY.md").read_text()
    memory_block = fake_model.requests[-1]["system"][3]["text"]
    assert memory_block.startswith("# MEMORY.md") and "The user's cat is called Miso" in memory_block
    assert "Miso" not in json.dumps(fake_model.requests[0]["system"])
