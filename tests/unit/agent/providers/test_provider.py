"""The Anthropic adapter's retry policy, against HTTP responses from an injected transport."""

from __future__ import annotations

import dataclasses
import json

import httpx2
import pytest

from clawgate.agent.providers.anthropic import AnthropicProvider
from clawgate.agent.providers.base import ModelRequest, ProviderError
from clawgate.config.schema import AnthropicSettings


def sse(*events: tuple[str, dict]) -> bytes:
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)


START = ("message_start", {"type": "message_start", "message": {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [], "stop_reason": None,
    "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 0}}})
OVERLOADED = ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})


def good_stream(text: str) -> bytes:
    return sse(START,
               ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
               ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
               ("content_block_stop", {"type": "content_block_stop", "index": 0}),
               ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                  "usage": {"output_tokens": 3}}),
               ("message_stop", {"type": "message_stop"}))


def provider(responses: list, **settings) -> tuple[AnthropicProvider, list[dict]]:
    seen: list[dict] = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        seen.append(json.loads(request.content))
        status, body = responses.pop(0)
        return httpx2.Response(status, content=body, headers={"content-type": "text/event-stream" if status == 200 else "application/json"})

    async def no_sleep(_: float) -> None:
        return None

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handle), base_url="http://127.0.0.1:1")
    conf = AnthropicSettings(api_key="k", base_url="http://127.0.0.1:1", **settings)
    return AnthropicProvider(conf, sleep=no_sleep, http_client=client), seen


REQUEST = ModelRequest(model="m", system=[{"type": "text", "text": "s"}], messages=[{"role": "user", "content": "hi"}])


async def test_overload_in_the_middle_of_a_stream_is_retried():
    p, seen = provider([(200, sse(START, OVERLOADED)), (200, good_stream("hello"))])
    deltas: list[str] = []
    response = await p.complete(REQUEST, on_text=deltas.append)
    assert response.text == "hello" and len(seen) == 2


async def test_fallback_model_after_retries_are_exhausted():
    overloaded = (529, json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "x"}}).encode())
    p, seen = provider([overloaded, overloaded, (200, good_stream("from fallback"))], max_retries=1, fallback_models=["m2"])
    response = await p.complete(REQUEST)
    assert response.text == "from fallback"
    assert [body["model"] for body in seen] == ["m", "m", "m2"]


async def test_a_requests_own_fallback_models_replace_the_providers():
    """An agent's `fallback_models` (config/agents.py) come with its requests; [] means none at all."""
    overloaded = (529, json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "x"}}).encode())
    p, seen = provider([overloaded, overloaded, (200, good_stream("from the agent's"))], max_retries=1,
                       fallback_models=["m2"])
    response = await p.complete(dataclasses.replace(REQUEST, fallback_models=["agent-m3"]))
    assert response.text == "from the agent's" and [body["model"] for body in seen] == ["m", "m", "agent-m3"]
    p, seen = provider([overloaded, overloaded], max_retries=1, fallback_models=["m2"])
    with pytest.raises(ProviderError):
        await p.complete(dataclasses.replace(REQUEST, fallback_models=[]))
    assert [body["model"] for body in seen] == ["m", "m"]


async def test_bad_request_is_not_retried_and_reads_as_one_line():
    bad = (400, json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": "messages: bad"}}).encode())
    p, seen = provider([bad])
    with pytest.raises(ProviderError) as info:
        await p.complete(REQUEST)
    assert len(seen) == 1 and "HTTP 400" in str(info.value) and "\n" not in str(info.value)


async def test_everything_failing_ends_in_a_clear_message():
    p, seen = provider([(500, b"{}")] * 3, max_retries=2)
    with pytest.raises(ProviderError) as info:
        await p.complete(REQUEST)
    assert len(seen) == 3 and "unavailable" in str(info.value)


def test_body_encoder_reuses_unchanged_messages_and_sees_replaced_ones() -> None:
    import json as _json

    from clawgate.agent.providers.base import ModelRequest
    from clawgate.agent.providers.body import BodyEncoder

    history = [{"role": "user", "content": [{"type": "text", "text": "héllo"}]},
               {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}]
    request = ModelRequest(model="m", system=[{"type": "text", "text": "sys"}], messages=history,
                           tools=[{"name": "t", "input_schema": {"type": "object"}}], session_key="s",
                           cache_control={"type": "ephemeral"})
    encoder = BodyEncoder()
    first = _json.loads(encoder.encode(request, "claude-x", stream=True))
    assert first == {"model": "claude-x", "max_tokens": 4096, "system": request.system, "tools": request.tools,
                     "cache_control": {"type": "ephemeral"}, "stream": True, "messages": history}
    # The projection replaces (never edits) a message it extends: the new object is encoded afresh.
    history[1] = {"role": "assistant", "content": [{"type": "text", "text": "hi there"}]}
    history.append({"role": "user", "content": [{"type": "text", "text": "next"}]})
    request.system = [{"type": "text", "text": "another system prompt"}]
    second = _json.loads(encoder.encode(request, "claude-x", stream=False))
    assert second["messages"] == history and "stream" not in second
    assert second["system"] == request.system and second["tools"] == request.tools


def test_body_encoder_cache_is_bounded_by_bytes_and_keeps_many_small_sessions() -> None:
    from clawgate.agent.providers.base import ModelRequest
    from clawgate.agent.providers.body import BodyEncoder

    def request(key: str, text: str) -> ModelRequest:
        return ModelRequest(model="m", system=[], session_key=key,
                            messages=[{"role": "user", "content": [{"type": "text", "text": text}]}])

    one = len(b'{"role":"user","content":[{"type":"text","text":""}]}') + 100
    encoder = BodyEncoder(max_bytes=250 * one)
    for i in range(200):  # many short sessions, more than any fixed count used to keep
        encoder.encode(request(f"s{i}", "x" * 100), "m", stream=False)
    assert len(encoder._sessions) == 200 and encoder._held_bytes == 200 * one
    encoder.encode(request("big", "y" * 100 * one), "m", stream=False)  # one large request pushes out the oldest
    assert encoder._held_bytes <= encoder.max_bytes
    assert "big" in encoder._sessions and "s0" not in encoder._sessions and "s199" in encoder._sessions
    assert encoder._held_bytes == sum(size for _, _, size in encoder._sessions.values())
    encoder.encode(request("huge", "z" * 300 * one), "m", stream=False)  # larger than the budget: kept alone
    assert list(encoder._sessions) == ["huge"] and encoder._held_bytes > encoder.max_bytes


def test_body_encoder_encodes_only_the_new_messages_of_a_growing_history(monkeypatch) -> None:
    import json as _json

    from clawgate.agent.providers import body
    from clawgate.agent.providers.base import ModelRequest

    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": [{"type": "text", "text": f"m{i}"}]}
               for i in range(1000)]
    request = ModelRequest(model="m", system=[], messages=history, session_key="s")
    encoder = body.BodyEncoder()
    encoder.encode(request, "m", stream=False)
    calls: list[object] = []
    real = body._encode
    monkeypatch.setattr(body, "_encode", lambda value: calls.append(value) or real(value))
    history += [{"role": "user", "content": [{"type": "text", "text": "new"}]}]
    out = _json.loads(encoder.encode(request, "m", stream=False))
    assert out["messages"] == history
    assert [c for c in calls if isinstance(c, dict)] == [history[-1]]  # one message encoded, not 1,001
