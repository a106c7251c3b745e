"""Anthropic Messages API adapter (async SDK, streaming), with our own retry and fallback.

The SDK's retries are off so one policy governs all: retry 429 / 529 / 5xx / timeouts /
connection errors with exponential backoff (honouring retry-after), then try each fallback
model, then raise a ProviderError whose text the user can act on.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from typing import TYPE_CHECKING, Any

from clawgate.config.schema import AnthropicSettings

from .anthropic_http import DirectStream
from . import anthropic_light
from .anthropic_private import missing_private_names
from .base import ModelRequest, ModelResponse, ProviderError, TextCallback, restart_preview
from .body import BodyEncoder
from .stream import StreamAccumulator, StreamCut, json_events

if TYPE_CHECKING:
    import anthropic

log = logging.getLogger(__name__)
_UNSET = object()
RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}
RETRYABLE_TYPES = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
# An error inside a 200 answer (an `error` event, a JSON error body) is explained by its type.
STATUS_OF_TYPE = {"authentication_error": 401, "permission_error": 403, "not_found_error": 404,
                  "request_too_large": 413, "invalid_request_error": 400}


def _block(block: Any) -> dict[str, Any]:
    """Keep only the fields we send back, so history stays byte-stable and valid."""
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return block.model_dump(exclude_none=True)


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, settings: AnthropicSettings, *, stream: bool = True, sleep=asyncio.sleep,
                 http_client: Any = None) -> None:
        self.settings = settings
        self.stream = stream
        self._sleep = sleep
        self._http_client = http_client  # an httpx2.AsyncClient, e.g. with a mock transport in tests
        self._client: "anthropic.AsyncAnthropic | None" = None
        self._warming = threading.Lock()
        self._body = BodyEncoder()
        # Built at the first streamed call, in the event loop (the SDK's headers name the async library).
        self._direct: DirectStream | None | object = _UNSET

    def warm(self) -> None:
        """Import the SDK and build the client. The SDK takes about a second to import (several on a
        busy machine), so the daemon calls this in a thread after it is ready instead of before."""
        with self._warming:  # the start-up thread and a first request may both get here
            if self._client is not None:
                return
            anthropic_light.load()  # the message path's part of the SDK (anthropic_light.py)
            from anthropic._base_client import DefaultAioHttpClient
            from anthropic._client import AsyncAnthropic
            from anthropic._version import __version__ as sdk_version

            self._client = AsyncAnthropic(
                api_key=self.settings.api_key,
                base_url=self.settings.base_url,
                max_retries=0,
                timeout=self.settings.timeout_seconds,
                # aiohttp (the SDK's own `aiohttp` extra) rather than httpx's pool, which re-checks every
                # idle connection on each request: a tenth of a message's CPU with 16 sessions at once.
                http_client=self._http_client or DefaultAioHttpClient(timeout=self.settings.timeout_seconds),
            )
            if missing := missing_private_names(self._client):
                # anthropic_private.py: an SDK other than the pinned line; its public path still works
                log.warning("anthropic SDK %s lacks %s; using its public request path (slower, same replies)",
                            sdk_version, ", ".join(missing))
                self._direct = None

    def _prepare_direct(self, client: "anthropic.AsyncAnthropic") -> DirectStream | None:
        """The parts of a message request that the SDK builds the same way every time, built once by
        the SDK itself (URL, headers with key, version and client info, timeout), and a sender that
        reuses them (anthropic_http.py: building them was a third of the SDK's cost per call, its
        httpx layers another third). None (use the SDK's whole path per call) when anything could
        make them differ: per-request auth (credential files) or middleware, or a client that does
        not send through the SDK's aiohttp transport. (The SDK's tracing spans only calls made
        through its resource methods, never a plain `post` like ours.)"""
        from anthropic._models import FinalRequestOptions

        if client.custom_auth is not None or getattr(client, "_middleware", None):
            return None
        options = FinalRequestOptions.construct(method="post", url="/v1/messages", content=b"",
                                                headers=_json_body()["headers"])
        built = client._build_request(options)
        headers = [(k, v) for k, v in built.headers.multi_items() if k.lower() != "content-length"]
        return DirectStream.for_client(client, built.url, headers, dict(built.extensions))

    def forget_session(self, key: str) -> None:
        """The session left memory (it is read again with new message objects): drop its cached body."""
        self._body.forget(key)

    @property
    def client(self) -> "anthropic.AsyncAnthropic":
        self.warm()
        assert self._client is not None
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()

    async def complete(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelResponse:
        if self._client is None:
            # Never import on the event loop: it would stall every session (and the cron timer) meanwhile.
            await asyncio.to_thread(self.warm)
        fallbacks = self.settings.fallback_models if request.fallback_models is None else request.fallback_models
        models = [request.model, *[m for m in fallbacks if m != request.model]]
        last: ProviderError | None = None
        for model in models:
            try:
                return await self._with_retries(request, model, on_text)
            except ProviderError as exc:
                last = exc
                if not exc.retryable:
                    raise
                log.warning("model %s unavailable (%s); trying the next fallback", model, exc)
        assert last is not None
        # Retryable: a provider chain moves on to its next provider (a local model, say).
        raise ProviderError(f"The model is unavailable right now ({last}). Please try again in a few minutes.",
                            retryable=True, cause=str(last))

    async def _with_retries(self, request: ModelRequest, model: str, on_text: TextCallback | None) -> ModelResponse:
        import httpx2
        from anthropic import _exceptions as anthropic

        attempts = self.settings.max_retries + 1
        for attempt in range(attempts):
            try:
                return await self._once(request, model, on_text)
            except anthropic.APIStatusError as exc:
                status, kind = exc.status_code, _error_type(exc)
                # An error event in the middle of a stream arrives with the stream's HTTP 200.
                if status not in RETRYABLE_STATUS and kind not in RETRYABLE_TYPES:
                    explained = STATUS_OF_TYPE.get(kind, status) if status == 200 else status
                    raise ProviderError(_explain(explained, exc)) from None
                error: ProviderError = ProviderError(f"{kind or f'HTTP {status}'} from the model API", retryable=True)
                delay = _retry_after(exc.response) if exc.response is not None and status != 200 else None
            except (anthropic.APITimeoutError, anthropic.APIConnectionError, httpx2.TransportError) as exc:
                # Transport errors raised while a stream is being read are not wrapped by the SDK.
                error = ProviderError(f"cannot reach the model API: {type(exc).__name__}", retryable=True)
                delay = None
            except StreamCut as exc:  # a partial reply is never the answer: ask again
                error = ProviderError(str(exc), retryable=True)
                delay = None
            if attempt + 1 >= attempts:
                raise error
            backoff = self.settings.retry_base_seconds * (2 ** attempt) * (0.75 + random.random() / 2)
            wait = min(60.0, delay if delay is not None else backoff)
            log.info("model call failed (%s); retry %d/%d in %.2fs", error, attempt + 1, attempts - 1, wait)
            await self._sleep(wait)
        raise AssertionError("unreachable")

    async def _once(self, request: ModelRequest, model: str, on_text: TextCallback | None) -> ModelResponse:
        from anthropic._streaming import AsyncStream
        from anthropic.types.message import Message

        body = self._body.encode(request, model, stream=self.stream)
        started = time.perf_counter()
        if self.stream:
            folded = StreamAccumulator(on_text)
            if self._direct is _UNSET:
                self._direct = self._prepare_direct(self.client)
            try:
                if isinstance(self._direct, DirectStream):
                    await self._direct.send(body, folded.feed)
                else:
                    stream = await self.client.post("/v1/messages", content=body, cast_to=Message, stream=True,
                                                    stream_cls=AsyncStream[object], options=_json_body())
                    async with stream:
                        if _is_json(stream.response.headers.get("content-type")):
                            await self._fold_json(stream.response, folded)
                        else:
                            async for event in stream:
                                folded.feed(event)
                return folded.response((time.perf_counter() - started) * 1000)
            except Exception:  # (not a cancellation: a stopped run keeps what it showed)
                if folded.shown:  # the text shown so far is not the answer
                    restart_preview(on_text)
                raise
        message = await self.client.post("/v1/messages", content=body, cast_to=Message, options=_json_body())
        if on_text is not None:
            for block in message.content:
                if block.type == "text":
                    on_text(block.text)
        usage = message.usage
        return ModelResponse(
            content=[_block(b) for b in message.content],
            stop_reason=message.stop_reason,
            usage={
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cache_read_input_tokens": getattr(usage, "cache_read_input_tokens", 0) or 0,
                "cache_creation_input_tokens": getattr(usage, "cache_creation_input_tokens", 0) or 0,
            },
            model=message.model,
            latency_ms=(time.perf_counter() - started) * 1000,
        )

    async def _fold_json(self, response: Any, folded: StreamAccumulator) -> None:
        """A JSON body answering a streaming request, on the SDK's path (anthropic_http.py on ours)."""
        raw = await response.aread()
        for event in json_events(raw):
            if event["type"] == "error":
                raise _status_error(self.client, _error_message(event), event, response)
            folded.feed(event)


def _status_error(client: Any, message: str, body: dict[str, Any], response: Any) -> Exception:
    """The SDK's typed error for an error envelope; the public base class when the private factory is
    gone (this is the path taken then, anthropic_private.py), which the retry policy reads the same."""
    from anthropic import _exceptions as anthropic

    make = getattr(client, "_make_status_error", None)
    if make is None:
        return anthropic.APIStatusError(message, response=response, body=body)
    return make(message, body=body, response=response)


def _is_json(content_type: str | None) -> bool:
    """A JSON body where an event stream was asked for (a proxy that ignores `stream`, an error)."""
    return (content_type or "").split(";")[0].strip().lower() == "application/json"


def _json_body() -> Any:
    """Request options for a body sent as ready bytes (BodyEncoder): the SDK is told what they are."""
    return {"headers": {"Content-Type": "application/json"}}


def _error_type(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("type"), str):
            return error["type"]
    return ""


def _error_message(body: dict[str, Any]) -> str:
    """The message of an error envelope, for the one line the user sees."""
    return str((body.get("error") or {}).get("message") or body)


def _retry_after(response: Any) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _explain(status: int, exc: "anthropic.APIStatusError") -> str:
    if status == 401:
        return "The Anthropic API rejected the API key. Set ANTHROPIC_API_KEY to a valid key and restart."
    if status == 403:
        return "The Anthropic API refused this request (permission denied for this key or model)."
    if status == 404:
        return "The model was not found. Check agent.model in config.toml."
    if status == 413:
        return "The conversation is too large for the model. Start a fresh session with /new."
    message = getattr(exc, "message", "") or ""
    return f"The model API rejected the request (HTTP {status}): {message[:200]}"
