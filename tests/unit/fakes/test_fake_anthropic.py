"""Tests for the fake Anthropic API, driven through the REAL ``anthropic`` SDK.

Why: every other test trusts this fake to behave like the real API towards the
SDK (parsing, streaming, retries, error classes), so that contract is checked here.
"""

from __future__ import annotations

import json

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anthropic
import pytest
from anthropic.types import TextBlock, ToolUseBlock

from tests.fakes.anthropic_api import (
    FakeAnthropic,
    Reply,
    error,
    last_user_text,
    text,
    tool_use,
    tool_uses,
)

MODEL = "claude-test"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    """A started fake, stopped after the test."""
    with FakeAnthropic() as f:
        yield f


@pytest.fixture
async def client(fake: FakeAnthropic) -> AsyncIterator[anthropic.AsyncAnthropic]:
    """A real async SDK client pointed at the fake."""
    c = anthropic.AsyncAnthropic(api_key="test", base_url=fake.base_url, max_retries=0)
    try:
        yield c
    finally:
        await c.close()


def user(s: str) -> list[dict]:
    return [{"role": "user", "content": s}]


async def test_plain_text_and_echo(fake: FakeAnthropic, client: anthropic.AsyncAnthropic) -> None:
    fake.enqueue(text("hello there"))
    msg = await client.messages.create(model=MODEL, max_tokens=100, messages=user("hi"))
    assert isinstance(msg.content[0], TextBlock)
    assert msg.content[0].text == "hello there"
    assert msg.model == MODEL
    assert msg.stop_reason == "end_turn"
    assert msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0
    assert msg.usage.cache_read_input_tokens == 0

    # Script exhausted -> default echo responder.
    msg = await client.messages.create(model=MODEL, max_tokens=100, messages=user("ping"))
    assert msg.content[0].text == "echo: ping"


async def test_tool_use_reply_parsed(fake: FakeAnthropic, client: anthropic.AsyncAnthropic) -> None:
    fake.enqueue(
        tool_use("read_file", {"path": "a.txt", "n": 3}, id="toolu_fixed"),
        tool_uses(("a", {"x": 1}), ("b", {"y": [1, 2]}), text="two at once"),
    )
    msg = await client.messages.create(model=MODEL, max_tokens=100, messages=user("read it"))
    assert msg.stop_reason == "tool_use"
    assert len(msg.content) == 1  # no empty text block
    block = msg.content[0]
    assert isinstance(block, ToolUseBlock)
    assert (block.id, block.name, block.input) == ("toolu_fixed", "read_file", {"path": "a.txt", "n": 3})

    msg = await client.messages.create(model=MODEL, max_tokens=100, messages=user("both"))
    assert [b.type for b in msg.content] == ["text", "tool_use", "tool_use"]
    ids = [b.id for b in msg.content if isinstance(b, ToolUseBlock)]
    assert len(set(ids)) == 2 and all(i.startswith("toolu_") for i in ids)
    assert msg.content[2].input == {"y": [1, 2]}


async def test_streaming_text_and_tool_json(fake: FakeAnthropic, client: anthropic.AsyncAnthropic) -> None:
    fake.enqueue(
        Reply(
            text="The quick brown fox jumps over the lazy dog",
            tool_calls=[{"name": "search", "input": {"query": "foxes", "limit": 5, "tags": ["a", "b"]}}],
        )
    )
    deltas: list[str] = []
    json_deltas = 0
    async with client.messages.stream(model=MODEL, max_tokens=100, messages=user("go")) as stream:
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                json_deltas += 1
        final = await stream.get_final_message()
    async with client.messages.stream(model=MODEL, max_tokens=100, messages=user("go again")) as stream:
        async for piece in stream.text_stream:
            deltas.append(piece)

    assert json_deltas >= 2
    assert final.content[0].type == "text"
    assert final.content[0].text == "The quick brown fox jumps over the lazy dog"
    tool = final.content[1]
    assert isinstance(tool, ToolUseBlock)
    assert tool.name == "search" and tool.input == {"query": "foxes", "limit": 5, "tags": ["a", "b"]}
    assert final.stop_reason == "tool_use"
    assert final.usage.output_tokens > 1

    assert len(deltas) >= 3  # echo text arrives as several deltas
    assert "".join(deltas) == "echo: go again"


async def test_429_is_retried_by_sdk(fake: FakeAnthropic) -> None:
    fake.fail_next(429, retry_after=0.01)
    fake.enqueue(text("after retry"))
    async with anthropic.AsyncAnthropic(api_key="test", base_url=fake.base_url, max_retries=2) as c:
        msg = await c.messages.create(model=MODEL, max_tokens=10, messages=user("x"))
    assert msg.content[0].text == "after retry"
    assert len(fake.requests) == 2
    assert [h.get("x-stainless-retry-count") for h in fake.headers] == ["0", "1"]


async def test_scripted_error_with_retry_after(fake: FakeAnthropic) -> None:
    fake.enqueue(error(529, retry_after=0.01), text("recovered"))
    async with anthropic.AsyncAnthropic(api_key="test", base_url=fake.base_url, max_retries=2) as c:
        msg = await c.messages.create(model=MODEL, max_tokens=10, messages=user("x"))
    assert msg.content[0].text == "recovered"


async def test_529_surfaces_without_retries(fake: FakeAnthropic, client: anthropic.AsyncAnthropic) -> None:
    fake.fail_next(529)
    with pytest.raises(anthropic.APIStatusError) as ei:
        await client.messages.create(model=MODEL, max_tokens=10, messages=user("x"))
    assert ei.value.status_code == 529
    assert ei.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    assert len(fake.requests) == 1


async def test_error_types(fake: FakeAnthropic, client: anthropic.AsyncAnthropic) -> None:
    fake.enqueue(error(429, message="slow down"), error(500))
    with pytest.raises(anthropic.RateLimitError) as ei:
        await client.messages.create(model=MODEL, max_tokens=10, messages=user("x"))
    assert ei.value.body["error"] == {"type": "rate_limit_error", "message": "slow down"}  # type: ignore[index]
    with pytest.raises(anthropic.InternalServerError):
        await client.messages.create(model=MODEL, max_tokens=10, messages=user("x"))

    async with anthropic.AsyncAnthropic(api_key="test", base_url=fake.base_url + "/nope", max_retries=0) as c:
        with pytest.raises(anthropic.NotFoundError):
            await c.messages.create(model=MODEL, max_tokens=10, messages=user("x"))


async def test_missing_api_key_is_401(fake: FakeAnthropic) -> None:
    # This SDK sends the api_key as `authorization: Bearer …`; omit it on the wire.
    async with anthropic.AsyncAnthropic(api_key="test", base_url=fake.base_url, max_retries=0) as c:
        with pytest.raises(anthropic.AuthenticationError):
            await c.messages.create(
                model=MODEL,
                max_tokens=10,
                messages=user("x"),
                extra_headers={"Authorization": anthropic.Omit(), "X-Api-Key": anthropic.Omit()},
            )
    assert "authorization" not in fake.headers[-1] and "x-api-key" not in fake.headers[-1]


async def test_invalid_requests_are_400(fake: FakeAnthropic, client: anthropic.AsyncAnthropic) -> None:
    bad_result = [
        {"role": "user", "content": "do it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_WRONG", "content": "ok"}]},
    ]
    with pytest.raises(anthropic.BadRequestError) as ei:
        await client.messages.create(model=MODEL, max_tokens=10, messages=bad_result)  # type: ignore[arg-type]
    assert "toolu_WRONG" in str(ei.value)

    with pytest.raises(anthropic.BadRequestError):
        await client.messages.create(model=MODEL, max_tokens=10, messages=[])

    # A valid pairing passes, and the tool_result-only turn echoes "".
    good = bad_result[:2] + [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}
    ]
    msg = await client.messages.create(model=MODEL, max_tokens=10, messages=good)  # type: ignore[arg-type]
    assert msg.content[0].text == "echo: "
    assert last_user_text({"messages": good}) == ""


async def test_enqueue_for_routes_concurrent_sessions(fake: FakeAnthropic, client: anthropic.AsyncAnthropic) -> None:
    fake.enqueue_for("session-A", tool_use("t", {"who": "A"}, id="toolu_A"), text("A done"))
    fake.enqueue_for("session-B", text("B done"))
    fake.enqueue(text("global"))

    async def session_a() -> str:
        history: list[dict] = [
            {"role": "user", "content": [{"type": "text", "text": "[session-A] "}, {"type": "text", "text": "hi"}]}
        ]
        first = await client.messages.create(model=MODEL, max_tokens=10, messages=history)  # type: ignore[arg-type]
        assert isinstance(first.content[0], ToolUseBlock) and first.content[0].input == {"who": "A"}
        history += [
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_A", "content": "r"}]},
        ]
        # The follow-up ends with a tool_result-only message but still routes to A's script.
        second = await client.messages.create(model=MODEL, max_tokens=10, messages=history)  # type: ignore[arg-type]
        return second.content[0].text  # type: ignore[union-attr]

    async def session_b() -> str:
        m = await client.messages.create(model=MODEL, max_tokens=10, messages=user("session-B hello"))
        return m.content[0].text  # type: ignore[union-attr]

    a, b = await asyncio.gather(session_a(), session_b())
    assert (a, b) == ("A done", "B done")
    other = await client.messages.create(model=MODEL, max_tokens=10, messages=user("someone else"))
    assert other.content[0].text == "global"


async def test_requests_and_headers_recorded(fake: FakeAnthropic, client: anthropic.AsyncAnthropic) -> None:
    await client.messages.create(model=MODEL, max_tokens=7, system="be brief", messages=user("one"))
    await client.messages.create(model=MODEL, max_tokens=7, messages=user("two"))
    fake.wait_requests(2, timeout=1)
    assert [last_user_text(r) for r in fake.requests] == ["one", "two"]
    assert fake.requests[0]["system"] == "be brief" and fake.requests[0]["max_tokens"] == 7
    # SDK 2.x sends the api_key as a bearer token; older ones used x-api-key.
    assert fake.headers[0].get("x-api-key") == "test" or fake.headers[0].get("authorization") == "Bearer test"
    assert "anthropic-version" in fake.headers[0]
    with pytest.raises(AssertionError):
        fake.wait_requests(3, timeout=0.05)
    fake.reset()
    assert fake.requests == [] and fake.headers == []


async def test_responder_latency_and_delay() -> None:
    seen: list[str] = []

    def responder(body: dict) -> Reply:
        seen.append(last_user_text(body))
        return text("custom", delay=0.05)

    with FakeAnthropic(responder=responder, latency=0.02) as fake:
        async with anthropic.AsyncAnthropic(api_key="test", base_url=fake.base_url, max_retries=0) as c:
            t0 = time.monotonic()
            msg = await c.messages.create(model=MODEL, max_tokens=10, messages=user("q"))
            assert time.monotonic() - t0 >= 0.07
    assert msg.content[0].text == "custom" and seen == ["q"]


def test_keepalive_reuses_one_connection_for_many_requests(fake: FakeAnthropic) -> None:
    """Many small requests ride one keep-alive connection (the benchmarks rely on it; their speed is
    measured by bench/, not here)."""
    n = 200
    with anthropic.Anthropic(api_key="test", base_url=fake.base_url, max_retries=0) as c:
        for i in range(n):
            c.messages.create(model=MODEL, max_tokens=10, messages=user(str(i)))
    assert len(fake.requests) == n
    assert fake.connections_accepted == 1


def test_stop_closes_server() -> None:
    fake = FakeAnthropic().start()
    url = fake.base_url
    with anthropic.Anthropic(api_key="test", base_url=url, max_retries=0) as c:
        c.messages.create(model=MODEL, max_tokens=10, messages=user("x"))
        fake.stop()
        with pytest.raises(anthropic.APIConnectionError):
            c.messages.create(model=MODEL, max_tokens=10, messages=user("x"))


def test_cli_process_serves_echo() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.anthropic_api", "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("READY http://127.0.0.1:"), line
        with anthropic.Anthropic(api_key="test", base_url=line.split()[1], max_retries=0) as c:
            msg = c.messages.create(model=MODEL, max_tokens=10, messages=user("from afar"))
        assert msg.content[0].text == "echo: from afar"  # type: ignore[union-attr]
    finally:
        proc.terminate()
        proc.wait(timeout=5)
    assert proc.returncode == 0


def test_fast_mode_reads_the_head_and_the_last_message_only() -> None:
    from tests.fakes.anthropic.server import _head_and_last_message

    body = {"model": "m", "max_tokens": 5, "system": [{"type": "text", "text": 'say "hi"'}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": 'x {"role": y'}]},
                         {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
                         {"role": "user", "content": [{"type": "text", "text": "last one"}]}]}
    raw = json.dumps(body, separators=(",", ":")).encode()
    partial = _head_and_last_message(raw)
    assert partial == {**body, "messages": [body["messages"][-1]]}
    assert _head_and_last_message(json.dumps(body).encode()) is None  # not compact: parsed whole instead
