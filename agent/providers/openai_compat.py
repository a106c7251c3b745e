"""OpenAI-compatible Chat Completions adapter (a local Ollama / vLLM, or any `/v1/chat/completions`).

Used as a fallback after Anthropic (SPEC 4). The loop speaks Anthropic-shaped requests, so this
module converts both ways: system blocks, text / tool_use / tool_result content blocks and tool
definitions become Chat Completions messages and `tools`; the reply's message and `tool_calls`
become our content blocks. Cache breakpoints are dropped (no such thing here).

Streaming (the default, `agent.stream`): `stream: true` with `stream_options.include_usage`, the
SSE chunks folded by openai_stream.py, text deltas to `on_text` as they come. A server that
ignores `stream` and answers with one JSON body is read as such (`on_text` gets the whole text).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re
import time
from typing import Any

import httpx

from clawgate.config.schema import OpenAICompatSettings

from .base import ModelRequest, ModelResponse, ProviderError, TextCallback, restart_preview, text_of
from .openai_stream import ChatStreamAccumulator, SseLines, StreamError

log = logging.getLogger(__name__)
RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}
STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use",
                "length": "max_tokens", "content_filter": "refusal"}


class OpenAICompatProvider:
    name = "openai"

    def __init__(self, settings: OpenAICompatSettings, *, transport: httpx.AsyncBaseTransport | None = None,
                 sleep=asyncio.sleep, stream: bool = True) -> None:
        self.settings = settings
        self.stream = stream
        self._sleep = sleep
        headers = {"authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self._client = httpx.AsyncClient(base_url=settings.base_url.rstrip("/") + "/", headers=headers,
                                         timeout=settings.timeout_seconds, transport=transport)

    async def close(self) -> None:
        await self._client.aclose()

    async def complete(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelResponse:
        body = to_chat_request(request, self.settings.model, stream=self.stream)
        attempts = self.settings.max_retries + 1
        taken = tool_use_ids(request.messages)
        for attempt in range(attempts):
            try:
                return await self._attempt(body, on_text, taken)
            except httpx.TransportError as exc:  # timeouts, refused connections, broken streams
                error = ProviderError(f"cannot reach the OpenAI-compatible API at {self.settings.base_url}: "
                                      f"{type(exc).__name__}", retryable=True)
            except ProviderError as exc:
                if not exc.retryable:
                    raise
                error = exc
            if attempt + 1 >= attempts:
                raise error
            wait = min(10.0, self.settings.retry_base_seconds * (2 ** attempt) * (0.75 + random.random() / 2))
            log.info("openai-compatible call failed (%s); retry %d/%d in %.2fs", error, attempt + 1, attempts - 1, wait)
            await self._sleep(wait)
        raise AssertionError("unreachable")

    async def _attempt(self, body: dict[str, Any], on_text: TextCallback | None, taken: set[str]) -> ModelResponse:
        """One call; when it fails after some text was streamed, the preview is told to start again."""
        if on_text is None:
            return await self._once(body, None, taken)
        shown = False

        def relay(text: str) -> None:
            nonlocal shown
            shown = True
            on_text(text)

        try:
            return await self._once(body, relay, taken)
        except Exception:  # (not a cancellation: a stopped run keeps what it showed)
            if shown:
                restart_preview(on_text)
            raise

    async def _once(self, body: dict[str, Any], on_text: TextCallback | None, taken: set[str]) -> ModelResponse:
        started = time.perf_counter()
        async with self._client.stream("POST", "chat/completions", json=body) as reply:
            if reply.status_code != 200:
                await reply.aread()
                if reply.status_code not in RETRYABLE_STATUS:
                    raise ProviderError(_explain(reply, self.settings.base_url))
                raise ProviderError(f"HTTP {reply.status_code} from the OpenAI-compatible API", retryable=True)
            if body.get("stream") and "text/event-stream" in reply.headers.get("content-type", ""):
                return await _read_stream(reply, on_text, started, taken)
            await reply.aread()
            response = from_chat_response(_json(reply), (time.perf_counter() - started) * 1000, taken)
        if on_text is not None and response.text:
            on_text(response.text)
        return response


async def _read_stream(reply: httpx.Response, on_text: TextCallback | None, started: float,
                       taken: set[str]) -> ModelResponse:
    folded, sse = ChatStreamAccumulator(on_text), SseLines()
    try:
        async for line in reply.aiter_lines():
            data = sse.feed(line)
            if data is not None:
                folded.feed_data(data)
                if folded.done:
                    break
        tail = sse.end()
        if tail is not None and not folded.done:
            folded.feed_data(tail)
    except StreamError as exc:
        raise ProviderError(f"The OpenAI-compatible API broke off its answer ({exc}).", retryable=True) from None
    if not folded.complete:
        raise ProviderError("The OpenAI-compatible API's stream ended before the answer was complete.", retryable=True)
    return from_chat_response(folded.as_completion(), (time.perf_counter() - started) * 1000, taken)


def _json(reply: httpx.Response) -> dict[str, Any]:
    try:
        data = reply.json()
    except ValueError:
        raise ProviderError("The OpenAI-compatible API returned a reply that is not JSON.", retryable=True) from None
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
        raise ProviderError("The OpenAI-compatible API returned a reply without choices.", retryable=True)
    return data


def _explain(reply: httpx.Response, base_url: str) -> str:
    status = reply.status_code
    if status == 401:
        return "The OpenAI-compatible API rejected the API key. Set OPENAI_API_KEY (or providers.openai_compat.api_key)."
    if status == 404:
        return (f"The OpenAI-compatible API at {base_url} has no such model or path (HTTP 404). "
                "Check providers.openai_compat.base_url (it usually ends in /v1) and model.")
    try:
        message = reply.json().get("error", {})
        message = message.get("message", "") if isinstance(message, dict) else str(message)
    except (ValueError, AttributeError):
        message = reply.text
    detail = " ".join(str(message).split())[:200]
    return f"The OpenAI-compatible API rejected the request (HTTP {status}): {detail}".rstrip(": ")


# --- request: Anthropic shape -> Chat Completions ---------------------------------------------

def _text_of(content: Any) -> str:
    """Text of a string or a list of blocks (tool_result content may be either)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b.get("text", "") if isinstance(b, dict) else str(b) for b in content
                 if not isinstance(b, dict) or b.get("type", "text") == "text"]
        return "\n".join(p for p in parts if p)
    return "" if content is None else str(content)


def to_chat_messages(request: ModelRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    system = "\n\n".join(t for t in (_text_of([b]) for b in request.system) if t)
    if system:
        out.append({"role": "system", "content": system})
    for message in request.messages:
        role, content = message["role"], message.get("content")
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        blocks = content or []
        if role == "assistant":
            text = text_of(blocks)
            calls = [{"id": b["id"], "type": "function",
                      "function": {"name": b["name"], "arguments": json.dumps(b.get("input") or {})}}
                     for b in blocks if b.get("type") == "tool_use"]
            item: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                item["tool_calls"] = calls
            elif not text:
                item["content"] = ""
            out.append(item)
            continue
        # A user message: tool results first (they must follow the assistant's tool_calls), then text.
        for b in blocks:
            if b.get("type") == "tool_result":
                result = _text_of(b.get("content"))
                if b.get("is_error"):
                    result = f"Error: {result}"
                out.append({"role": "tool", "tool_call_id": b["tool_use_id"], "content": result})
        texts = [b.get("text", "") for b in blocks if b.get("type") == "text" and b.get("text")]
        if texts:
            out.append({"role": "user", "content": "\n\n".join(texts)})
    return out


def to_chat_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {
        "name": t["name"],
        "description": t.get("description", ""),
        "parameters": t.get("input_schema") or {"type": "object", "properties": {}},
    }} for t in tools if t.get("name")]


def to_chat_request(request: ModelRequest, model: str, *, stream: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": to_chat_messages(request),
                            "max_tokens": request.max_tokens, "stream": stream}
    if stream:  # the usage arrives in one last chunk with empty choices
        body["stream_options"] = {"include_usage": True}
    if request.tools:
        body["tools"] = to_chat_tools(request.tools)
    return body


# --- response: Chat Completions -> Anthropic shape --------------------------------------------

def _arguments(raw: Any) -> dict[str, Any]:
    """Tool arguments arrive as a JSON string; anything unparsable or not an object becomes {}."""
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except (ValueError, TypeError):
        log.warning("tool call arguments are not valid JSON; using {}")
        return {}
    return value if isinstance(value, dict) else {}


def tool_use_ids(messages: list[dict[str, Any]]) -> set[str]:
    """The tool-call ids already in a conversation: a new call must not reuse one."""
    return {b["id"] for m in messages if isinstance(m.get("content"), list)
            for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("id")}


def _unique(call_id: str, taken: set[str]) -> str:
    """`call_id`, or with a numbered suffix when it is already used. Some servers number their calls
    anew in every reply (`call_0`, ...) or repeat an id within one; stored as is, the conversation
    would hold one id twice and the next request be refused (OpenAI, Anthropic, vLLM all check)."""
    if call_id not in taken:
        return call_id
    n = 2
    while f"{call_id}_{n}" in taken:
        n += 1
    return f"{call_id}_{n}"


def from_chat_response(data: dict[str, Any], latency_ms: float = 0.0, taken: set[str] | None = None) -> ModelResponse:
    """The reply in Anthropic's shape; tool-call ids made unique against `taken` (the conversation's)."""
    used = set(taken or ())
    choice = data["choices"][0] if isinstance(data["choices"][0], dict) else {}
    message = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    text = _text_of(message.get("content"))
    if text:
        content.append({"type": "text", "text": text})
    for n, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") or {}
        if not function.get("name"):
            continue
        call_id = re.sub(r"[^A-Za-z0-9_-]", "_", str(call.get("id") or "")) or f"call_{n}_{int(time.time() * 1000)}"
        call_id = _unique(call_id, used)
        used.add(call_id)
        content.append({"type": "tool_use", "id": call_id,
                        "name": function["name"], "input": _arguments(function.get("arguments"))})
    finish = choice.get("finish_reason")
    stop = STOP_REASONS.get(finish, finish)
    if any(b["type"] == "tool_use" for b in content) and stop in (None, "end_turn"):
        stop = "tool_use"  # some servers say "stop" even when they called tools
    return ModelResponse(
        content=content,
        stop_reason=stop,
        usage=_usage(data.get("usage")),
        model=str(data.get("model") or ""),
        latency_ms=latency_ms,
    )


def _usage(usage: Any) -> dict[str, int]:
    """Anthropic-shaped counts: prompt tokens served from the server's cache are cache reads,
    not input (OpenAI counts them in prompt_tokens; Anthropic's input_tokens excludes them)."""
    usage = usage if isinstance(usage, dict) else {}
    prompt = _count(usage.get("prompt_tokens"))
    out = {"input_tokens": prompt, "output_tokens": _count(usage.get("completion_tokens"))}
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else 0
    if cached:
        out.update(input_tokens=max(0, prompt - cached), cache_read_input_tokens=cached)
    return out


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 0
