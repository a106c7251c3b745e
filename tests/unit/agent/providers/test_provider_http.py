"""The Anthropic adapter over real HTTP on 127.0.0.1, with the transport the daemon uses (aiohttp via
the SDK): replies folded from the raw stream, retries, and every way a connection can fail."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest

from clawgate.agent.providers.anthropic import AnthropicProvider
from clawgate.agent.providers.anthropic_http import DirectStream
from clawgate.agent.providers.base import ModelRequest, ProviderError
from clawgate.config.schema import AnthropicSettings
from tests.fakes.anthropic_api import FakeAnthropic, error, text, tool_use

REQUEST = ModelRequest(model="claude-test", system=[{"type": "text", "text": "s"}],
                       messages=[{"role": "user", "content": "hi"}])


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as f:
        yield f


def make(base_url: str, sleeps: list[float] | None = None, **settings) -> AnthropicProvider:
    async def record_sleep(seconds: float) -> None:
        if sleeps is not None:
            sleeps.append(seconds)

    conf = AnthropicSettings(api_key="test", base_url=base_url, retry_base_seconds=0.01, **settings)
    return AnthropicProvider(conf, sleep=record_sleep)


@pytest.fixture
async def provider(fake: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    p = make(fake.base_url)
    yield p
    await p.close()


async def test_the_daemon_transport_is_aiohttp(provider: AnthropicProvider) -> None:
    """The reason for the choice: httpx's pool re-checks every idle connection per request."""
    await provider.complete(REQUEST)
    transport = provider.client._client._transport  # type: ignore[attr-defined]
    assert type(transport).__name__ == "AiohttpTransport"


async def test_requests_built_once_carry_exactly_what_the_sdk_itself_sends(fake: FakeAnthropic,
                                                                          provider: AnthropicProvider) -> None:
    """The URL, headers and timeout are built by the SDK once and reused: every call sends the same
    headers, body and path as the SDK's own `post` (the path kept for clients it cannot serve)."""
    await provider.complete(REQUEST)
    direct = provider._direct
    assert isinstance(direct, DirectStream)  # the prebuilt path was taken
    ours = fake.headers[-1]
    provider._direct = None  # the SDK's whole path, as for a client with middleware
    assert (await provider.complete(REQUEST)).text == "echo: hi"
    provider._direct = direct
    sdk = fake.headers[-1]
    assert ours == sdk  # same names and values, the key and the body's length included
    assert fake.requests[-1] == fake.requests[-2]
    assert ours["x-stainless-async"].startswith("async:asyncio")  # built in the event loop, like the SDK's
    # a second call reuses the template and is counted by the server as a separate request
    await provider.complete(REQUEST)
    assert len(fake.requests) == 3 and fake.headers[-1] == ours


async def test_a_client_with_middleware_keeps_the_sdks_whole_request_path(fake: FakeAnthropic) -> None:
    """Middleware may change each request, so nothing is built ahead for such a client."""
    import anthropic

    seen: list[str] = []

    async def middleware(request, call_next):  # type: ignore[no-untyped-def]
        seen.append("called")
        return await call_next(request)

    p = make(fake.base_url)
    p._client = anthropic.AsyncAnthropic(api_key="test", base_url=fake.base_url, max_retries=0, middleware=[middleware])
    try:
        reply = await p.complete(REQUEST)
    finally:
        await p.close()
    assert reply.text.startswith("echo") and seen == ["called"] and p._direct is None


async def test_streamed_text_and_tool_call_are_folded_from_raw_events(fake: FakeAnthropic,
                                                                      provider: AnthropicProvider) -> None:
    long = "word " * 200  # the fake splits it into many text deltas
    fake.enqueue(text(long, input_tokens=11, output_tokens=7),
                 tool_use("read_file", {"path": "notes/a b.md", "nested": {"n": [1, 2]}}, text="Reading."))
    deltas: list[str] = []
    first = await provider.complete(REQUEST, on_text=deltas.append)
    assert first.text == long and "".join(deltas) == long and len(deltas) > 1
    assert first.stop_reason == "end_turn" and first.model == "claude-test"
    assert first.usage["input_tokens"] == 11 and first.usage["output_tokens"] == 7
    second = await provider.complete(REQUEST)
    assert second.stop_reason == "tool_use"
    assert second.content[0] == {"type": "text", "text": "Reading."}
    call = second.content[1]
    assert call["type"] == "tool_use" and call["name"] == "read_file" and call["id"]
    assert call["input"] == {"path": "notes/a b.md", "nested": {"n": [1, 2]}}
    # the body went out as JSON the API accepts, with our headers
    assert fake.requests[-1]["messages"] == [{"role": "user", "content": "hi"}]
    assert fake.headers[-1].get("content-type", "").startswith("application/json")


async def test_429_honours_retry_after_then_succeeds(fake: FakeAnthropic) -> None:
    sleeps: list[float] = []
    p = make(fake.base_url, sleeps)
    try:
        fake.enqueue(error(429, retry_after=2.5), text("after the wait"))
        response = await p.complete(REQUEST)
    finally:
        await p.close()
    assert response.text == "after the wait" and sleeps == [2.5] and len(fake.requests) == 2


async def test_overloaded_529_is_retried_then_reported_in_one_line(fake: FakeAnthropic) -> None:
    p = make(fake.base_url, max_retries=2)
    try:
        fake.enqueue(error(529), error(529), error(529))
        with pytest.raises(ProviderError) as info:
            await p.complete(REQUEST)
    finally:
        await p.close()
    assert info.value.retryable and "\n" not in str(info.value) and len(fake.requests) == 3


async def test_bad_request_is_one_line_and_not_retried(fake: FakeAnthropic, provider: AnthropicProvider) -> None:
    fake.enqueue(error(400, message="messages: roles must alternate"))
    with pytest.raises(ProviderError) as info:
        await provider.complete(REQUEST)
    assert "HTTP 400" in str(info.value) and "alternate" in str(info.value) and len(fake.requests) == 1


async def _raw_server(handle: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
                      ) -> tuple[asyncio.Server, str, list[int]]:
    """A loopback server speaking just enough HTTP to fail in a chosen way; counts connections' requests."""
    seen: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                seen.append(len(seen))
                await handle(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}", seen


def _sse(*events: dict) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


START = {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                                              "content": [], "stop_reason": None, "stop_sequence": None,
                                              "usage": {"input_tokens": 3, "output_tokens": 0}}}


WHOLE = (START, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
         {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "whole"}},
         {"type": "content_block_stop", "index": 0},
         {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
         {"type": "message_stop"})


def _stream_body(*events: dict, ended: bool = True) -> bytes:
    """A 200 event stream as one HTTP chunk; `ended` False leaves the body open (no last chunk)."""
    header = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    body = _sse(*events)
    return header + f"{len(body):x}\r\n".encode() + body + b"\r\n" + (b"0\r\n\r\n" if ended else b"")


async def test_a_stream_cut_off_midway_is_retried_and_the_partial_reply_dropped() -> None:
    attempts: list[int] = []

    async def handle(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        attempts.append(1)
        if len(attempts) == 1:
            half = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "half"}}
            writer.write(_stream_body(*WHOLE[:2], half, ended=False))
            await writer.drain()
            writer.transport.abort()  # the connection dies in the middle of the reply
            raise ConnectionError
        writer.write(_stream_body(*WHOLE))
        await writer.drain()

    server, url, _ = await _raw_server(handle)
    p = make(url)
    try:
        response = await p.complete(REQUEST)
    finally:
        await p.close()
        server.close()
    assert response.text == "whole" and len(attempts) == 2


async def test_no_answer_within_the_timeout_is_a_clear_retryable_error() -> None:
    async def never_answer(reader: asyncio.StreamReader, _writer: asyncio.StreamWriter) -> None:
        await reader.read()  # hold the request open until the client gives up

    server, url, seen = await _raw_server(never_answer)
    p = make(url, timeout_seconds=0.3, max_retries=1)
    try:
        with pytest.raises(ProviderError) as info:
            await p.complete(REQUEST)
    finally:
        await p.close()
        server.close()
    assert info.value.retryable and "\n" not in str(info.value)
    assert "unavailable" in str(info.value) and len(seen) == 2


async def test_nothing_listening_is_cannot_reach() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()  # the port is now closed: connections are refused
    p = make(f"http://127.0.0.1:{port}", max_retries=0)
    try:
        with pytest.raises(ProviderError) as info:
            await p.complete(REQUEST)
    finally:
        await p.close()
    assert "cannot reach the model API" in (info.value.cause or str(info.value))



@pytest.mark.parametrize("kind, retried", [("overloaded_error", True), ("invalid_request_error", False)])
async def test_an_error_event_inside_a_200_stream_is_the_sdks_error(kind: str, retried: bool) -> None:
    """The API reports an overload midway as an `error` event in a stream that began with 200: it is
    retried like a 529; an error that retrying cannot fix is one line, sent once."""
    async def handle(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(seen) == 1:
            writer.write(_stream_body(START, {"type": "error", "error": {"type": kind, "message": "midway"}}))
        else:
            writer.write(_stream_body(*WHOLE))
        await writer.drain()

    server, url, seen = await _raw_server(handle)
    p = make(url)
    try:
        if retried:
            assert (await p.complete(REQUEST)).text == "whole"
        else:
            with pytest.raises(ProviderError) as info:
                await p.complete(REQUEST)
            assert "midway" in str(info.value) and "\n" not in str(info.value)
    finally:
        await p.close()
        server.close()
    assert isinstance(p._direct, DirectStream)
    assert len(seen) == (2 if retried else 1)


async def test_a_configured_proxy_carries_the_request(fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP(S)_PROXY in the environment (the SDK's client honours it) is honoured by the direct path
    too: the request goes through the proxy, never straight to the API."""
    through: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        through.append(head.split(b"\r\n", 1)[0])
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        body = await reader.readexactly(length)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", fake.port)
        origin_form = head.replace(fake.base_url.encode(), b"", 1).replace(b"keep-alive", b"close")
        up_writer.write(origin_form + body)  # as a proxy does; one request per connection here
        await up_writer.drain()
        writer.write(await up_reader.read())
        await writer.drain()
        writer.close()
        up_writer.close()

    server = await asyncio.start_server(proxy, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    p = make(fake.base_url)
    try:
        reply = await p.complete(REQUEST)
    finally:
        await p.close()
        server.close()
    assert reply.text == "echo: hi" and isinstance(p._direct, DirectStream)
    assert through == [f"POST {fake.base_url}/v1/messages HTTP/1.1".encode()]


async def test_a_stream_read_in_awkward_pieces_gives_the_same_reply_and_deltas() -> None:
    """Lines are cut from whatever each read delivered: a read that ends inside a line, inside a UTF-8
    character or between the \\r and \\n of a line end (CRLF lines are the SDK decoder's too) changes nothing."""
    text_delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "héllo "}}
    more = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "wörld"}}
    events = (*WHOLE[:2], text_delta, more, *WHOLE[3:])
    body = b"".join(f"event: {e['type']}\r\ndata: {json.dumps(e, ensure_ascii=False)}\r\n\r\n".encode() for e in events)
    cuts = sorted({body.index("é".encode()) + 1, body.index(b"\r\n\r\n") + 1, body.index(b"data:") + 3,
                   body.index("ö".encode()) + 1, len(body) - 1})
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)])]
    assert b"".join(pieces) == body and len(pieces) == 6

    async def handle(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        for piece in pieces:  # one HTTP chunk each, each written on its own so reads end between them
            writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            await writer.drain()
            await asyncio.sleep(0.01)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    server, url, _ = await _raw_server(handle)
    p = make(url)
    deltas: list[str] = []
    try:
        response = await p.complete(REQUEST, on_text=deltas.append)
    finally:
        await p.close()
        server.close()
    assert isinstance(p._direct, DirectStream)
    assert response.text == "héllo wörld" and "".join(deltas) == "héllo wörld"
    assert response.stop_reason == "end_turn"
