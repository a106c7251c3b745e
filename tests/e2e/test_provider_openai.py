"""The OpenAI-compatible adapter (conversion both ways, retries) and the provider chain; one
end-to-end run of the real daemon falling back from an overloaded Anthropic to a local endpoint."""

from __future__ import annotations

import json

import httpx
import pytest

from clawgate.agent.providers.base import ModelRequest, ModelResponse, ProviderError
from clawgate.agent.providers.anthropic import AnthropicProvider
from clawgate.agent.providers.chain import ProviderChain
from clawgate.agent.providers.openai_compat import OpenAICompatProvider, from_chat_response, to_chat_request
from clawgate.config.schema import AnthropicSettings, OpenAICompatSettings, Settings
from clawgate.gateway.wiring import make_provider
from tests.fakes.openai_api import FakeOpenAI, chat_text, chat_tool_call

CACHE = {"type": "ephemeral"}

REQUEST = ModelRequest(
    model="claude-sonnet-4-5",
    system=[{"type": "text", "text": "You are Claw."}, {"type": "text", "text": "Be brief.", "cache_control": CACHE}],
    messages=[
        {"role": "user", "content": [{"type": "text", "text": "list the"}, {"type": "text", "text": "files"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "toolu_1", "name": "list_dir", "input": {"path": "."}},
            {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "a.txt"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt\nb.txt"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "no such file"}],
             "is_error": True},
            {"type": "text", "text": "(note: be quick)"},
        ]},
    ],
    tools=[{"name": "list_dir", "description": "List a directory.",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}, "cache_control": CACHE}],
    max_tokens=512,
    cache_control=CACHE,
)


def completion(message: dict, finish: str = "stop", usage: dict | None = None) -> dict:
    return {"id": "c1", "model": "local", "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage or {"prompt_tokens": 3, "completion_tokens": 2}}


def provider(responses: list, **settings) -> tuple[OpenAICompatProvider, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        item = responses.pop(0)
        if isinstance(item, Exception):
            raise item
        status, body = item
        return httpx.Response(status, json=body) if not isinstance(body, bytes) else httpx.Response(status, content=body)

    async def no_sleep(_: float) -> None:
        return None

    conf = OpenAICompatSettings(base_url="http://127.0.0.1:9/v1", model="local", **settings)
    return OpenAICompatProvider(conf, transport=httpx.MockTransport(handle), sleep=no_sleep), seen


def test_request_conversion_system_tools_and_tool_round_trip():
    body = to_chat_request(REQUEST, "local")
    assert body["model"] == "local" and body["max_tokens"] == 512 and body["stream"] is False
    messages = body["messages"]
    assert messages[0] == {"role": "system", "content": "You are Claw.\n\nBe brief."}
    assert messages[1] == {"role": "user", "content": "list the\n\nfiles"}
    assistant = messages[2]
    assert assistant["role"] == "assistant" and assistant["content"] == "Looking."
    assert [c["id"] for c in assistant["tool_calls"]] == ["toolu_1", "toolu_2"]
    assert assistant["tool_calls"][0]["type"] == "function"
    assert assistant["tool_calls"][0]["function"] == {"name": "list_dir", "arguments": json.dumps({"path": "."})}
    assert messages[3] == {"role": "tool", "tool_call_id": "toolu_1", "content": "a.txt\nb.txt"}
    assert messages[4] == {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: no such file"}
    assert messages[5] == {"role": "user", "content": "(note: be quick)"}
    assert body["tools"] == [{"type": "function", "function": {
        "name": "list_dir", "description": "List a directory.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]
    assert "cache_control" not in json.dumps(body)


def test_request_without_tools_has_no_tools_key_and_string_content_passes():
    request = ModelRequest(model="m", system=[], messages=[{"role": "user", "content": "hi"}])
    body = to_chat_request(request, "local")
    assert body["messages"] == [{"role": "user", "content": "hi"}] and "tools" not in body


def test_response_text_usage_and_finish_reasons():
    response = from_chat_response(completion({"role": "assistant", "content": "Hello"}, "stop",
                                              {"prompt_tokens": 12, "completion_tokens": 4}))
    assert response.content == [{"type": "text", "text": "Hello"}]
    assert response.stop_reason == "end_turn" and response.model == "local"
    assert response.usage == {"input_tokens": 12, "output_tokens": 4}
    assert from_chat_response(completion({"content": "cut"}, "length")).stop_reason == "max_tokens"


def test_response_tool_calls_become_tool_use_blocks():
    message = {"role": "assistant", "content": "Let me look.", "tool_calls": [
        {"id": "call_9", "type": "function", "function": {"name": "list_dir", "arguments": '{"path": "src"}'}},
        {"id": "call_10", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a'}},
        {"id": "call:11", "type": "function", "function": {"name": "list_dir", "arguments": '[1, 2]'}},
    ]}
    response = from_chat_response(completion(message, "tool_calls"))
    assert response.stop_reason == "tool_use"
    assert response.text == "Let me look."
    assert response.tool_calls == [
        {"type": "tool_use", "id": "call_9", "name": "list_dir", "input": {"path": "src"}},
        {"type": "tool_use", "id": "call_10", "name": "read_file", "input": {}},  # invalid JSON: never crash
        {"type": "tool_use", "id": "call_11", "name": "list_dir", "input": {}},  # not an object
    ]
    # some servers report "stop" although they called a tool
    assert from_chat_response(completion(message, "stop")).stop_reason == "tool_use"


async def test_complete_posts_to_chat_completions_and_calls_on_text_once():
    p, seen = provider([(200, completion({"role": "assistant", "content": "Hi there"}))], api_key="sk-test")
    deltas: list[str] = []
    response = await p.complete(REQUEST, on_text=deltas.append)
    await p.close()
    assert response.text == "Hi there" and deltas == ["Hi there"]
    assert str(seen[0].url) == "http://127.0.0.1:9/v1/chat/completions"
    assert seen[0].headers["authorization"] == "Bearer sk-test"
    assert json.loads(seen[0].content)["model"] == "local"


async def test_retries_429_5xx_and_connection_errors_then_succeeds():
    p, seen = provider([(429, {"error": {"message": "slow down"}}), (503, b"busy"),
                        httpx.ConnectError("refused"), httpx.ReadTimeout("slow"),
                        (200, completion({"content": "finally"}))], max_retries=4)
    assert (await p.complete(REQUEST)).text == "finally"
    assert len(seen) == 5


async def test_retries_are_bounded_and_the_error_is_retryable():
    p, seen = provider([(500, b"x")] * 3, max_retries=2)
    with pytest.raises(ProviderError) as info:
        await p.complete(REQUEST)
    assert info.value.retryable and len(seen) == 3
    assert "HTTP 500" in str(info.value) and "\n" not in str(info.value)


async def test_permanent_error_is_not_retried_and_reads_in_one_line():
    p, seen = provider([(400, {"error": {"message": "bad\nrequest: tools unsupported"}})], max_retries=3)
    with pytest.raises(ProviderError) as info:
        await p.complete(REQUEST)
    assert not info.value.retryable and len(seen) == 1
    assert str(info.value) == "The OpenAI-compatible API rejected the request (HTTP 400): bad request: tools unsupported"
    p, _ = provider([(401, {"error": "nope"})])
    with pytest.raises(ProviderError, match="OPENAI_API_KEY"):
        await p.complete(REQUEST)


class Scripted:
    def __init__(self, name: str, outcome: Exception | str) -> None:
        self.name, self.outcome, self.calls, self.closed, self.warmed = name, outcome, 0, False, False

    def warm(self) -> None:
        self.warmed = True

    async def complete(self, request, on_text=None) -> ModelResponse:
        self.calls += 1
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return ModelResponse(content=[{"type": "text", "text": self.outcome}])

    async def close(self) -> None:
        self.closed = True


async def test_chain_falls_back_on_retryable_failure():
    first, second = Scripted("anthropic", ProviderError("overloaded", retryable=True)), Scripted("openai", "local answer")
    chain = ProviderChain([first, second])
    assert chain.name == "anthropic->openai"
    assert (await chain.complete(REQUEST)).text == "local answer"
    assert (first.calls, second.calls) == (1, 1)
    chain.warm()
    await chain.close()
    assert first.warmed and first.closed and second.closed


async def test_chain_stops_on_permanent_failure():
    first, second = Scripted("anthropic", ProviderError("key rejected")), Scripted("openai", "unused")
    with pytest.raises(ProviderError, match="key rejected"):
        await ProviderChain([first, second]).complete(REQUEST)
    assert second.calls == 0


async def test_chain_all_failing_names_every_provider_in_one_line():
    chain = ProviderChain([Scripted("anthropic", ProviderError("overloaded", retryable=True)),
                           Scripted("openai", ProviderError("cannot reach", retryable=True))])
    with pytest.raises(ProviderError) as info:
        await chain.complete(REQUEST)
    message = str(info.value)
    assert message.startswith("Every model provider failed") and "anthropic: overloaded" in message
    assert "openai: cannot reach" in message and "\n" not in message


async def test_anthropic_marks_exhausted_retries_retryable_so_a_chain_moves_on(fake_model):
    fake_model.fail_next(529, times=10)
    conf = AnthropicSettings(api_key="k", base_url=fake_model.base_url, max_retries=1, retry_base_seconds=0,
                             fallback_models=["fallback-model"])
    anthropic = AnthropicProvider(conf, stream=False)
    try:
        with pytest.raises(ProviderError) as info:
            await anthropic.complete(ModelRequest(model="test-model", system=[], messages=[
                {"role": "user", "content": [{"type": "text", "text": "hi"}]}]))
    finally:
        await anthropic.close()
    assert info.value.retryable and len(fake_model.requests) == 4


def test_make_provider_wiring():
    compat = {"base_url": "http://127.0.0.1:11434/v1", "model": "llama3.1"}
    both = Settings.model_validate({"providers": {"anthropic": {"api_key": "k"}, "openai_compat": compat}})
    assert make_provider(both).name == "anthropic->openai"
    only_local = make_provider(Settings.model_validate({"providers": {"openai_compat": compat}}))
    # a single provider still sits in a chain: its circuit breaker makes a dead endpoint fail fast
    assert isinstance(only_local, ProviderChain) and only_local.name == "openai"
    assert isinstance(only_local.providers[0], OpenAICompatProvider) and only_local.providers[0].stream
    assert make_provider(Settings()).name == "unconfigured"
    assert make_provider(Settings.model_validate({"providers": {"anthropic": {"api_key": "k"}}})).name == "anthropic"
    off = make_provider(Settings.model_validate({"providers": {"anthropic": {"api_key": "k"}, "breaker": {"enabled": False}},
                                                 "agent": {"stream": False}}))
    assert isinstance(off, ProviderChain) and off.breakers == [None]
    chain = make_provider(Settings.model_validate({"providers": {"openai_compat": compat, "breaker": {
        "failure_threshold": 5, "cooldown_seconds": 7}}}))
    assert isinstance(chain, ProviderChain) and chain.breakers[0] is not None
    assert (chain.breakers[0].threshold, chain.breakers[0].cooldown) == (5, 7.0)


async def test_daemon_falls_back_to_openai_compatible_endpoint(daemon_factory, fake_model):
    fake_model.fail_next(529, times=100)
    with FakeOpenAI() as local:
        local.enqueue(chat_tool_call("list_dir", {"path": "."}, call_id="call_ls"), chat_text("You have hello.txt."))
        daemon = daemon_factory({
            "CLAWGATE_PROVIDERS__ANTHROPIC__MAX_RETRIES": "0",
            "CLAWGATE_PROVIDERS__OPENAI_COMPAT": json.dumps({"base_url": local.base_url, "model": "local"}),
        })
        (daemon.workspace / "hello.txt").write_text("hi")
        async with daemon.client() as client:
            assert (await client.request("status"))["provider"] == "anthropic->openai"
            final = await client.chat("what files do I have?")
        assert final["state"] == "final" and final["text"] == "You have hello.txt."
        assert len(fake_model.requests) == 2  # Anthropic was tried first for both model calls
        assert [r["model"] for r in local.requests] == ["local", "local"]
        first, second = local.requests
        assert first["messages"][0]["role"] == "system"
        assert first["messages"][-1]["role"] == "user"
        assert first["messages"][-1]["content"].endswith("what files do I have?")
        assert any(t["function"]["name"] == "list_dir" for t in first["tools"])
        call, result = second["messages"][-2:]
        assert call["tool_calls"][0]["id"] == "call_ls"
        assert result["role"] == "tool" and result["tool_call_id"] == "call_ls" and "hello.txt" in result["content"]


def test_config_reads_openai_compat_and_its_key_from_the_environment(tmp_path):
    from clawgate.config.loader import ConfigError, load_settings
    from clawgate.config.paths import Paths

    env = {"CLAWGATE_PROVIDERS__OPENAI_COMPAT": '{"base_url": "http://127.0.0.1:11434/v1", "model": "llama3.1"}',
           "OPENAI_API_KEY": "sk-local"}
    compat = load_settings(Paths(tmp_path), env).providers.openai_compat
    assert compat is not None and compat.model == "llama3.1" and compat.api_key == "sk-local"
    assert load_settings(Paths(tmp_path), {"OPENAI_API_KEY": "sk"}).providers.openai_compat is None
    with pytest.raises(ConfigError) as info:
        load_settings(Paths(tmp_path), {"CLAWGATE_PROVIDERS__OPENAI_COMPAT": '{"model": "llama3.1"}'})
    assert "providers.openai_compat.base_url" in str(info.value) and "\n" not in str(info.value)


async def test_duplicate_tool_call_ids_from_the_server_are_made_unique_before_they_are_stored(daemon_factory):
    """A server that numbers its calls anew in each reply (and one that repeats an id within a reply):
    the stored ids are unique, so the next request is not refused (the fake refuses duplicates)."""
    twice = {"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_0", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}},
        {"id": "call_0", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "b.txt"}'}},
    ]}, "finish_reason": "tool_calls"}
    with FakeOpenAI() as local:
        local.enqueue(chat_tool_call("list_dir", {"path": "."}, call_id="call_0"), twice,
                      chat_text("a.txt says A, b.txt says B."))
        daemon = daemon_factory({"CLAWGATE_PROVIDERS__OPENAI_COMPAT": json.dumps({"base_url": local.base_url,
                                                                                   "model": "local"})}, model=False)
        (daemon.workspace / "a.txt").write_text("A")
        (daemon.workspace / "b.txt").write_text("B")
        async with daemon.client() as client:
            final = await client.chat("what do a.txt and b.txt say?")
        assert final["state"] == "final" and final["text"] == "a.txt says A, b.txt says B.", final
        assert len(local.requests) == 3
        last = local.requests[-1]["messages"]
        ids = [c["id"] for m in last for c in m.get("tool_calls") or []]
        assert ids[0] == "call_0" and len(set(ids)) == 3
        results = {m["tool_call_id"]: m["content"] for m in last if m["role"] == "tool"}
        assert set(results) == set(ids)  # every result answers its own call
        assert "1\tA\n" in results[ids[1]] and "1\tB\n" in results[ids[2]]
