"""Consolidation with the real Anthropic provider against the fake Messages API (no daemon)."""

from __future__ import annotations

import json

import anthropic

from clawgate.agent.context.consolidation import SUMMARY_PROMPT, Consolidator, identifiers
from clawgate.agent.memory.store import Memory
from clawgate.agent.providers.anthropic import AnthropicProvider
from clawgate.agent.session import Session
from clawgate.config.schema import AgentSettings, AnthropicSettings
from tests.context_helpers import answer, builder, tool_round, user, workspace
from tests.fakes.anthropic_api import error, text

SETTINGS = AgentSettings(context_tokens=2_000, consolidate_at=0.5, model="claude-test")


def _setup(tmp_path, fake, settings: AgentSettings = SETTINGS):
    root = workspace(tmp_path)
    # the SDK's httpx client: this helper's provider is never closed (an aiohttp session would warn)
    provider = AnthropicProvider(AnthropicSettings(api_key="k", base_url=fake.base_url, max_retries=0), stream=False,
                                 http_client=anthropic.DefaultAsyncHttpxClient())
    ctx = builder(root)
    memory = Memory(root)
    consolidator = Consolidator(provider=provider, context=ctx, memory=memory, settings=settings)
    session = Session("main", tmp_path / "sessions" / "main.jsonl", fsync=False)
    return root, ctx, memory, consolidator, session


def _talk(session, ctx, turns: int, start: int = 0) -> None:
    for turn in range(start, start + turns):
        user(session, f"turn {turn}: check service {turn} on port 80{turn:02d}", ctx)
        tool_round(session, "exec", {"argv": ["curl", f"http://svc{turn}.local:80{turn:02d}/health"]}, "ok " * 40)
        answer(session, f"service {turn} is healthy")


def _is_summary(body: dict) -> bool:
    return any("consolidate the older part" in b["text"] for b in body.get("system", []))


async def test_below_the_threshold_nothing_happens(tmp_path, fake_model):
    _, ctx, _, consolidator, session = _setup(tmp_path, fake_model)
    _talk(session, ctx, 1)
    assert await consolidator.maybe_consolidate(session) is None
    assert fake_model.requests == [] and session.window_start == 0


async def test_size_triggers_summary_into_memory_and_only_the_pointer_moves(tmp_path, fake_model):
    root, ctx, memory, consolidator, session = _setup(tmp_path, fake_model)
    _talk(session, ctx, 8)
    raw_before = session.path.read_bytes()
    messages_before = session.llm_messages(0)
    tokens = ctx.compactor.estimate_tokens(session, 0)
    assert tokens >= consolidator.threshold
    fake_model.enqueue(text("- Checked services 0-5; all healthy."))
    record = await consolidator.maybe_consolidate(session)

    assert record is not None and record["ok"] is True
    cut = record["upto"]
    assert session.window_start == cut > 0
    start = session.llm_messages(cut)[0]
    assert start["role"] == "user" and start["content"][0]["type"] == "text"  # never inside a tool pair
    assert ctx.compactor.estimate_tokens(session, cut) <= consolidator.threshold // 2 + 200
    # the transcript is intact: the old bytes are still the file's prefix, only a record was added
    raw_after = session.path.read_bytes()
    assert raw_after.startswith(raw_before)
    added = [json.loads(line) for line in raw_after[len(raw_before):].splitlines()]
    assert [r["kind"] for r in added] == ["consolidated"]
    assert Session("main", session.path, fsync=False).llm_messages(0) == messages_before
    # the summary went to today's log, naming the transcript range
    log = memory.daily_path().read_text()
    assert "- Checked services 0-5; all healthy." in log
    assert f"(full transcript: sessions/main.jsonl, seq 1–{record['seq_to']})" in log
    # the summary request used the dedicated prompt and saw the old part
    body = fake_model.requests[-1]
    assert _is_summary(body) and "turn 0: check service 0" in body["messages"][0]["content"][0]["text"]
    # the next request starts with the pointer block, then the kept window
    user(session, "what next?", ctx)
    request = ctx.build(session)
    head = request.messages[0]["content"][0]["text"]
    assert head.startswith("[memory] The earlier part of this conversation (sessions/main.jsonl, up to seq")
    assert "- Checked services 0-5; all healthy." in head and "memory_get" in head
    assert "turn 0:" not in json.dumps(request.messages)
    assert request.messages[1:] == session.llm_messages(cut)[1:]


async def test_identifiers_survive_the_summary(tmp_path, fake_model):
    root, ctx, memory, consolidator, session = _setup(tmp_path, fake_model)
    user(session, "deploy commit 3f9a1c2b7d to https://deploy.example.com/api/v2 and use /srv/app/config.yaml", ctx)
    tool_round(session, "exec", {"argv": ["git", "push", "origin", "release-2025.06"]}, "pushed " * 50)
    answer(session, "Deployed 3f9a1c2b7d; the service listens on api.internal:8443, task t_4be1c09e2a.")
    _talk(session, ctx, 7, start=1)
    # the model keeps some identifiers and paraphrases others away
    fake_model.enqueue(text("- Deployed commit 3f9a1c2b7d to https://deploy.example.com/api/v2."))
    record = await consolidator.maybe_consolidate(session)
    assert record is not None and record["ok"]
    prompt = fake_model.requests[-1]["system"][0]["text"]
    assert prompt == SUMMARY_PROMPT
    assert "character for character" in prompt and "ports" in prompt and "URLs" in prompt and "hashes" in prompt
    log = memory.daily_path().read_text()
    for ident in ("3f9a1c2b7d", "https://deploy.example.com/api/v2", "/srv/app/config.yaml", "api.internal:8443",
                  "t_4be1c09e2a", "release-2025.06"):
        assert ident in log, ident
        assert ident in record["pointer"], ident
    assert "2025-06" not in identifiers([{"role": "user", "content": [{"type": "text", "text": "[runtime] 10:00"}]}])


async def test_model_failure_archives_the_raw_part_and_still_moves_the_pointer(tmp_path, fake_model):
    root, ctx, memory, consolidator, session = _setup(tmp_path, fake_model)
    _talk(session, ctx, 8)
    raw_before = session.path.read_bytes()
    fake_model.enqueue(error(400, message="summaries are broken today"))
    record = await consolidator.maybe_consolidate(session)
    assert record is not None and record["ok"] is False and "summaries are broken today" in record["error"]
    assert session.window_start == record["upto"] > 0
    archive = root / record["archive"]
    archived = archive.read_text()
    assert archive.parent == root / "memory" / "archive"
    for turn in range(record["upto"] // 4):
        assert f"turn {turn}: check service {turn}" in archived
        assert f"http://svc{turn}.local:80{turn:02d}/health" in archived
    assert "ok " * 40 in archived  # tool output verbatim: nothing lost
    assert session.path.read_bytes().startswith(raw_before)
    assert f"archived to {record['archive']}" in memory.daily_path().read_text()
    user(session, "continue", ctx)
    head = ctx.build(session).messages[0]["content"][0]["text"]
    assert "could not be summarised" in head and record["archive"] in head


async def test_second_consolidation_merges_the_earlier_summary(tmp_path, fake_model):
    _, ctx, _, consolidator, session = _setup(tmp_path, fake_model)
    _talk(session, ctx, 8)
    fake_model.enqueue(text("- first part: services 0-5 healthy"))
    first = await consolidator.maybe_consolidate(session)
    _talk(session, ctx, 8, start=8)
    fake_model.enqueue(text("- everything up to service 13 healthy"))
    second = await consolidator.maybe_consolidate(session)
    assert first and second and second["upto"] > first["upto"]
    sent = fake_model.requests[-1]["messages"][0]["content"][0]["text"]
    assert sent.startswith("Summary of even earlier parts:\n- first part: services 0-5 healthy")
    assert session.window_start == second["upto"]
    reopened = Session("main", session.path, fsync=False)
    assert reopened.window_start == second["upto"] and reopened.consolidation["summary"].startswith("- everything")


async def test_a_single_giant_turn_is_left_alone(tmp_path, fake_model):
    _, ctx, _, consolidator, session = _setup(tmp_path, fake_model)
    user(session, "one huge request", ctx)
    for i in range(10):
        tool_round(session, "read_file", {"path": f"f{i}"}, "z" * 500)
    answer(session, "done")
    assert await consolidator.maybe_consolidate(session) is None
    assert fake_model.requests == [] and session.window_start == 0


async def test_consolidated_request_is_accepted_by_the_api(tmp_path, fake_model):
    """The window after a cut must be a valid Messages request (no orphan tool_result)."""
    _, ctx, _, consolidator, session = _setup(tmp_path, fake_model)
    _talk(session, ctx, 9)
    fake_model.enqueue(text("- summary"))
    assert await consolidator.maybe_consolidate(session)
    user(session, "next", ctx)
    request = ctx.build(session)
    fake_model.enqueue(text("fine"))
    response = await consolidator.provider.complete(request)
    assert response.text == "fine"
    assert fake_model.requests[-1]["cache_control"] == {"type": "ephemeral"}
