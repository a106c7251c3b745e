"""Streaming from an OpenAI-compatible endpoint: SSE chunks folded into one reply, text deltas as
they come, tool calls assembled from fragments, usage from the last chunk; end to end through
the real daemon, the gateway client sees the deltas and a streamed tool call runs."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from clawgate.agent.providers.base import ModelRequest, ProviderError
from clawgate.agent.providers.openai_compat import OpenAICompatProvider
from clawgate.agent.providers.openai_stream import ChatStreamAccumulator, SseLines
from clawgate.config.schema import OpenAICompatSettings
from tests.fakes.openai_api import FakeOpenAI, chat_text, chat_tool_call, stream_chunks

REQUEST = ModelRequest(model="claude-x", system=[{"type": "text", "text": "Be brief."}],
                       messages=[{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
                       tools=[{"name": "list_dir", "description": "List.", "input_schema": {"type": "object"}}])


async def no_sleep(_: float) -> None:
    return None


def sse(*items: dict | str, done: bool = True) -> bytes:
    body = "".join(f"data: {json.dumps(i) if isinstance(i, dict) else i}\n\n" for i in items)
    return (body + ("data: [DONE]\n\n" if done else "")).encode()


def mocked(*bodies: bytes | int, **settings) -> tuple[OpenAICompatProvider, list[httpx.Request]]:
    seen: list[httpx.Request] = []
    queue = list(bodies)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        item = queue.pop(0)
        if isinstance(item, int):
            return httpx.Response(item, json={"error": {"message": "busy"}})
        return httpx.Response(200, content=item, headers={"content-type": "text/event-stream"})

    conf = OpenAICompatSettings(base_url="http://127.0.0.1:9/v1", model="local", **settings)
    return OpenAICompatProvider(conf, transport=httpx.MockTransport(handle), sleep=no_sleep), seen


def test_sse_framing_joins_data_lines_and_skips_comments():
    lines = SseLines()
    out = [lines.feed(line) for line in [": keep-alive", "event: x", "data: {\"a\":", "data: 1}", "", ""]]
    assert out == [None, None, None, None, '{"a":\n1}', None]
    assert lines.feed("data: tail") is None and lines.end() == "tail" and lines.end() is None


def test_accumulator_folds_the_fakes_real_chunk_sequence():
    deltas: list[str] = []
    folded = ChatStreamAccumulator(deltas.append)
    for chunk in stream_chunks(chat_text("Hello there, friend"), "local", include_usage=True):
        folded.feed_data(json.dumps(chunk))
    folded.feed_data("[DONE]")
    assert len(deltas) > 2 and "".join(deltas) == "Hello there, friend"
    body = folded.as_completion()
    assert body["choices"][0]["message"]["content"] == "Hello there, friend"
    assert body["choices"][0]["finish_reason"] == "stop" and body["usage"]["completion_tokens"] == 7


async def test_streams_text_deltas_and_usage_with_cached_tokens():
    chunk = {"model": "local", "choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}]}
    provider, seen = mocked(sse(
        {"model": "local", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}, chunk,
        {"choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 2,
                                  "prompt_tokens_details": {"cached_tokens": 40}}}))
    deltas: list[str] = []
    response = await provider.complete(REQUEST, on_text=deltas.append)
    await provider.close()
    assert deltas == ["Hel", "lo"] and response.text == "Hello" and response.stop_reason == "end_turn"
    assert response.usage == {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 40}
    body = json.loads(seen[0].content)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_tool_call_fragments_are_assembled_in_index_order():
    def part(index: int, **fields) -> dict:
        return {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, **fields}]}}]}

    provider, _ = mocked(sse(
        part(0, id="call_a", type="function", function={"name": "list_dir", "arguments": ""}),
        part(1, id="call_b", type="function", function={"name": "read_file", "arguments": '{"pa'}),
        part(0, function={"arguments": '{"path": '}),
        part(1, function={"arguments": 'th": "a.txt"}'}),
        part(0, function={"arguments": '"src"}'}),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}))
    response = await provider.complete(REQUEST)
    assert response.stop_reason == "tool_use"
    assert response.tool_calls == [
        {"type": "tool_use", "id": "call_a", "name": "list_dir", "input": {"path": "src"}},
        {"type": "tool_use", "id": "call_b", "name": "read_file", "input": {"path": "a.txt"}},
    ]


async def test_a_cut_off_or_failing_stream_is_retried_then_reported_retryable():
    cut = sse({"choices": [{"index": 0, "delta": {"content": "Hal"}}]}, done=False)
    error = sse({"error": {"message": "model\ncrashed"}}, done=False)
    provider, seen = mocked(cut, error, 503, max_retries=2)
    with pytest.raises(ProviderError) as info:
        await provider.complete(REQUEST)
    assert info.value.retryable and len(seen) == 3 and "\n" not in str(info.value)
    provider, _ = mocked(error, sse({"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}),
                         max_retries=1)
    assert (await provider.complete(REQUEST)).text == "ok"


async def test_a_server_that_ignores_stream_is_read_as_one_json_reply():
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"model": "m", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "whole"}, "finish_reason": "stop"}]})

    provider = OpenAICompatProvider(OpenAICompatSettings(base_url="http://127.0.0.1:9/v1", model="m"),
                                    transport=httpx.MockTransport(handle))
    deltas: list[str] = []
    assert (await provider.complete(REQUEST, on_text=deltas.append)).text == "whole" and deltas == ["whole"]


async def test_real_http_stream_from_the_fake_server():
    with FakeOpenAI() as fake:
        fake.enqueue(chat_tool_call("list_dir", {"path": "docs"}, call_id="call_7"), chat_text("All done here."))
        provider = OpenAICompatProvider(OpenAICompatSettings(base_url=fake.base_url, model="local"))
        call = await provider.complete(REQUEST)
        deltas: list[str] = []
        answer = await provider.complete(REQUEST, on_text=deltas.append)
        await provider.close()
    assert call.tool_calls == [{"type": "tool_use", "id": "call_7", "name": "list_dir", "input": {"path": "docs"}}]
    assert answer.text == "All done here." and len(deltas) >= 3 and "".join(deltas) == "All done here."
    assert answer.usage == {"input_tokens": 11, "output_tokens": 7}
    assert all(r["stream"] is True for r in fake.requests)


async def test_daemon_streams_text_deltas_and_runs_a_streamed_tool_call(daemon_factory):
    gate = threading.Event()  # the stream waits after its first text chunk until the client has it
    with FakeOpenAI(hold=gate) as local:
        local.enqueue(chat_tool_call("read_file", {"path": "notes.txt"}, call_id="call_rf"),
                      chat_text("The notes say: buy milk and eggs."))
        daemon = daemon_factory({"CLAWGATE_PROVIDERS__OPENAI_COMPAT": json.dumps({"base_url": local.base_url,
                                                                                   "model": "local"})}, model=False)
        (daemon.workspace / "notes.txt").write_text("buy milk and eggs")
        deltas: list[str] = []
        async with daemon.client() as client:
            assert (await client.request("status"))["provider"] == "openai"
            final = await client.chat("what do my notes say?", on_delta=lambda t: (deltas.append(t), gate.set()))
        assert final["state"] == "final" and final["text"] == "The notes say: buy milk and eggs."
        # the first chunk arrived on its own, the rest after it: streamed in parts
        assert len(deltas) >= 2 and "".join(deltas).endswith("The notes say: buy milk and eggs.")
        assert len(local.requests) == 2 and all(r["stream"] is True for r in local.requests)
        result = local.requests[1]["messages"][-1]
        assert result["role"] == "tool" and result["tool_call_id"] == "call_rf" and "buy milk" in result["content"]
