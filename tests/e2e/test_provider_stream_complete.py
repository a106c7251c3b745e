"""A streamed reply is the answer only when it is whole: a stream that ends before `message_stop` is
retried (and the live preview told to start again), a JSON body answering a streaming request is read
as what it is, and the streamed token counts equal the non-streamed ones. Against the fake Messages
API over real HTTP, on both the prebuilt request path and the SDK's own; then through the daemon."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from clawgate.agent.providers.anthropic import AnthropicProvider
from clawgate.agent.providers.anthropic_http import DirectStream
from clawgate.agent.providers.base import ModelRequest, ProviderError
from clawgate.config.schema import AnthropicSettings
from tests.fakes.anthropic_api import FakeAnthropic, Reply, text, tool_use
from tests.harness import DaemonProcess

REQUEST = ModelRequest(model="claude-test", system=[{"type": "text", "text": "s"}],
                       messages=[{"role": "user", "content": "hi"}])


class Preview:
    """What a live preview sees: the deltas, and each time it was told to start again."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.restarts = 0

    def __call__(self, text: str) -> None:
        self.parts.append(text)

    def restart(self) -> None:
        self.restarts += 1
        self.parts.clear()

    @property
    def text(self) -> str:
        return "".join(self.parts)


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as f:
        yield f


@pytest.fixture(params=["direct", "sdk"])
async def provider(request: pytest.FixtureRequest, fake: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    """The daemon's prebuilt request path, and the SDK's whole path (clients with middleware use it)."""
    p = make(fake.base_url)
    await p.complete(REQUEST)  # builds the prebuilt path
    assert isinstance(p._direct, DirectStream)
    if request.param == "sdk":
        p._direct = None
    fake.reset()
    yield p
    await p.close()


def make(base_url: str, *, stream: bool = True, **settings: Any) -> AnthropicProvider:
    async def no_sleep(_: float) -> None:
        return None

    conf = AnthropicSettings(api_key="test", base_url=base_url, retry_base_seconds=0.01, **settings)
    return AnthropicProvider(conf, sleep=no_sleep, stream=stream)


@pytest.mark.parametrize("cut", ["before_stop", "midway"])
async def test_a_stream_that_ends_before_message_stop_is_retried_and_the_preview_restarts(
        fake: FakeAnthropic, provider: AnthropicProvider, cut: str) -> None:
    fake.enqueue(text("The first answer, cut off before its end", cut=cut), text("The whole answer."))
    preview = Preview()
    response = await provider.complete(REQUEST, on_text=preview)
    assert response.text == "The whole answer." and response.stop_reason == "end_turn"
    assert preview.restarts == 1 and preview.text == "The whole answer."
    assert len(fake.requests) == 2


async def test_a_stream_cut_every_time_is_a_retryable_error_never_an_answer(fake: FakeAnthropic) -> None:
    p = make(fake.base_url, max_retries=1)
    try:
        fake.enqueue(*[text("partial", cut="before_stop") for _ in range(2)])
        with pytest.raises(ProviderError) as info:
            await p.complete(REQUEST, on_text=Preview())
    finally:
        await p.close()
    assert info.value.retryable and "\n" not in str(info.value)
    assert "message_stop" in (info.value.cause or str(info.value)) and len(fake.requests) == 2


async def test_a_complete_message_as_json_answers_a_streaming_request(fake: FakeAnthropic,
                                                                      provider: AnthropicProvider) -> None:
    """A proxy that ignores `stream`: its whole message is the answer, the same as unstreamed."""
    fake.enqueue(text("Answered in one body.", as_json=True, input_tokens=40, output_tokens=6),
                 Reply(text="Reading.", tool_calls=[{"name": "read_file", "input": {"path": "a.txt"}}], as_json=True))
    preview = Preview()
    first = await provider.complete(REQUEST, on_text=preview)
    assert first.text == "Answered in one body." and preview.text == first.text and first.stop_reason == "end_turn"
    assert first.usage == {"input_tokens": 40, "output_tokens": 6, "cache_read_input_tokens": 0,
                           "cache_creation_input_tokens": 0}
    second = await provider.complete(REQUEST)
    assert second.stop_reason == "tool_use" and second.content[0] == {"type": "text", "text": "Reading."}
    call = second.content[1]
    assert call["name"] == "read_file" and call["input"] == {"path": "a.txt"} and call["id"].startswith("toolu_")
    assert len(fake.requests) == 2 and all(r["stream"] is True for r in fake.requests)


@pytest.mark.parametrize("kind, retried, says", [
    ("overloaded_error", True, ""),
    ("invalid_request_error", False, "HTTP 400"),
    ("authentication_error", False, "ANTHROPIC_API_KEY"),
])
async def test_an_error_envelope_as_json_is_that_error(fake: FakeAnthropic, provider: AnthropicProvider,
                                                       kind: str, retried: bool, says: str) -> None:
    fake.enqueue(Reply(body={"type": "error", "error": {"type": kind, "message": "said by the proxy"}}),
                 text("after the error"))
    if retried:
        assert (await provider.complete(REQUEST)).text == "after the error"
        assert len(fake.requests) == 2
        return
    with pytest.raises(ProviderError) as info:
        await provider.complete(REQUEST)
    assert says in str(info.value) and "\n" not in str(info.value) and not info.value.retryable
    assert len(fake.requests) == 1


@pytest.mark.parametrize("body", [{"type": "message", "content": [], "stop_reason": None}, {"ok": True}])
async def test_json_that_is_not_a_complete_message_is_retried_not_read_as_an_empty_answer(
        fake: FakeAnthropic, provider: AnthropicProvider, body: dict) -> None:
    fake.enqueue(Reply(body=body), text("a real answer"))
    assert (await provider.complete(REQUEST)).text == "a real answer"
    assert len(fake.requests) == 2


@pytest.mark.parametrize("late", [False, True])
async def test_streamed_token_counts_equal_the_unstreamed_ones(fake: FakeAnthropic, late: bool) -> None:
    """message_delta's usage counts (input and cache counts too, which some proxies send only there)
    are the final ones: the same request costs the same streamed or not."""
    def reply() -> Reply:
        return text("counted", input_tokens=1234, output_tokens=56, cache_read_tokens=700, cache_write_tokens=90,
                     usage_late=late)

    streamed, whole = make(fake.base_url), make(fake.base_url, stream=False)
    try:
        fake.enqueue(reply(), reply())
        a = await streamed.complete(REQUEST)
        b = await whole.complete(REQUEST)
    finally:
        await streamed.close()
        await whole.close()
    assert [bool(r.get("stream")) for r in fake.requests] == [True, False]
    assert a.usage == b.usage == {"input_tokens": 1234, "output_tokens": 56, "cache_read_input_tokens": 700,
                                  "cache_creation_input_tokens": 90}


# --- through the daemon ------------------------------------------------------------------------

async def _run(daemon: DaemonProcess, message: str, seen: threading.Event | None = None
               ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Send one chat message; the final payload and every `delta` payload of its run (`seen` is set
    at the first)."""
    deltas: list[dict[str, Any]] = []
    async with daemon.client() as client:
        run_id = (await client.request("chat.send", {"session": "main", "text": message}))["runId"]

        async def final() -> dict[str, Any]:
            async for frame in client.events():
                payload = frame["payload"]
                if frame["event"] == "chat" and payload.get("runId") == run_id:
                    if payload["state"] != "delta":
                        return payload
                    deltas.append(payload)
                    if seen is not None:
                        seen.set()
            raise AssertionError("the gateway closed the connection")

        return await asyncio.wait_for(final(), 120), deltas


async def test_the_user_gets_the_retried_whole_answer_never_the_cut_one(daemon: DaemonProcess,
                                                                        fake_model: FakeAnthropic) -> None:
    shown = threading.Event()  # the cut stream waits after its first delta until the client has it
    fake_model.enqueue(text("Half of an answer that", cut="midway", hold=shown),
                       text("The whole answer, from the retry."))
    final, deltas = await _run(daemon, "hello", shown)
    assert final["state"] == "final" and final["text"] == "The whole answer, from the retry."
    # the preview was told to start again, and what followed the restart is the whole answer
    restart = next(i for i, d in enumerate(deltas) if d.get("restart"))
    assert "".join(d["text"] for d in deltas[restart:]) == "The whole answer, from the retry."
    before = "".join(d["text"] for d in deltas[:restart])
    assert before and "Half of an answer that".startswith(before) and before != "Half of an answer that"
    async with daemon.client() as client:
        history = await client.request("chat.history", {"session": "main"})
    texts = [str(m) for m in history["messages"]]
    assert any("The whole answer, from the retry." in t for t in texts)
    assert not any("Half of an answer" in t for t in texts)


async def test_the_terminal_chat_says_the_answer_starts_again(daemon: DaemonProcess, fake_model: FakeAnthropic) -> None:
    shown = threading.Event()  # set once the first delta went out to the session's clients
    fake_model.enqueue(text("Half of an answer that", cut="midway", hold=shown), text("The whole answer."))
    async with daemon.client(subscribe=["main"]) as watcher:
        chat = asyncio.ensure_future(asyncio.to_thread(daemon.cli, "chat", "-m", "hello", "--stream", timeout=120))

        async def first_delta() -> None:
            async for frame in watcher.events():
                if frame["event"] == "chat" and frame["payload"].get("state") == "delta":
                    shown.set()
                    return

        await asyncio.wait_for(first_delta(), 120)
        done = await chat
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[-1] == "The whole answer." and "Half of an answer that".startswith(out[0]) and len(out) == 2
    assert "starts again" in done.stderr


async def test_a_json_body_to_the_daemons_streaming_request_is_the_answer(daemon: DaemonProcess,
                                                                         fake_model: FakeAnthropic) -> None:
    fake_model.enqueue(tool_use("list_dir", {"path": "."}), text("Listed it, in one JSON body.", as_json=True))
    final, _ = await _run(daemon, "what is here?")
    assert final["state"] == "final" and final["text"] == "Listed it, in one JSON body."
    assert len(fake_model.requests) == 2 and all(r["stream"] is True for r in fake_model.requests)


async def test_the_daemons_usage_figures_are_the_same_streamed_or_not(daemon_factory,
                                                                      fake_model: FakeAnthropic) -> None:
    """`status` usage after the same request, streamed (the chat default) and unstreamed."""
    figures = []
    for stream in ("true", "false"):
        daemon = daemon_factory({"CLAWGATE_AGENT__STREAM": stream})
        fake_model.enqueue(text("counted", input_tokens=1500, output_tokens=40, cache_read_tokens=900,
                                cache_write_tokens=120, usage_late=True))
        async with daemon.client() as client:
            assert (await asyncio.wait_for(client.chat("hello"), 120))["text"] == "counted"
            figures.append((await client.request("status"))["usage"]["today"])
        daemon.kill()
    assert [bool(r.get("stream")) for r in fake_model.requests] == [True, False]
    assert figures[0] == figures[1]
    assert figures[0]["input_tokens"] == 1500 and figures[0]["cache_read_input_tokens"] == 900
