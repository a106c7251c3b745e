"""The direct request path leans on private names of the pinned anthropic SDK: every one of them
must resolve (a failure names the missing symbol), and if one is gone the provider says so in one
log line and answers through the SDK's public path instead."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from clawgate.agent.providers.anthropic import AnthropicProvider
from clawgate.agent.providers.anthropic_http import DirectStream
from clawgate.agent.providers.anthropic_private import PRIVATE_NAMES, missing_private_names
from clawgate.agent.providers.base import ModelRequest, ProviderError
from clawgate.config.schema import AnthropicSettings
from tests.fakes.anthropic_api import FakeAnthropic, Reply, text

REQUEST = ModelRequest(model="claude-test", system=[{"type": "text", "text": "s"}],
                       messages=[{"role": "user", "content": "hi"}])


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as f:
        yield f


def _provider(fake: FakeAnthropic) -> AnthropicProvider:
    return AnthropicProvider(AnthropicSettings(api_key="test", base_url=fake.base_url, max_retries=0))


async def test_every_private_name_resolves_in_the_pinned_sdk(fake: FakeAnthropic) -> None:
    import anthropic

    provider = _provider(fake)
    try:
        provider.warm()
        missing = missing_private_names(provider.client)
        assert not missing, (f"anthropic {anthropic.__version__} lacks {', '.join(missing)}: update "
                             "agent/providers/anthropic_http.py for this SDK or pin the SDK back in pyproject.toml")
        fake.enqueue(text("direct"))
        assert (await provider.complete(REQUEST)).text == "direct"
        assert isinstance(provider._direct, DirectStream)  # all present: the direct path is used
    finally:
        await provider.close()


async def test_a_missing_private_name_falls_back_to_the_public_path(fake: FakeAnthropic,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    import anthropic

    name = "_make_status_error_from_response"
    spec = f"anthropic._client:AsyncAnthropic.{name}"
    assert spec in PRIVATE_NAMES
    owner = next(cls for cls in anthropic.AsyncAnthropic.__mro__ if name in vars(cls))
    monkeypatch.delattr(owner, name)  # as a future SDK that renamed it
    provider = _provider(fake)
    try:
        with caplog.at_level(logging.WARNING, logger="clawgate.agent.providers.anthropic"):
            provider.warm()
        [line] = [r.getMessage() for r in caplog.records if "lacks" in r.getMessage()]
        assert spec in line and "\n" not in line and "public request path" in line
        fake.enqueue(text("public path reply"))
        deltas: list[str] = []
        reply = await provider.complete(REQUEST, on_text=deltas.append)
        assert reply.text == "public path reply" and "".join(deltas) == "public path reply"
        assert provider._direct is None and len(fake.requests) == 1
    finally:
        await provider.close()


@pytest.mark.parametrize("kind,retried", [("overloaded_error", True), ("invalid_request_error", False)])
async def test_without_the_private_error_factory_an_error_envelope_is_still_that_error(
        fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch, kind: str, retried: bool) -> None:
    """The public path reads a JSON error body too; with the SDK's factory gone it raises the public
    APIStatusError, which the retry policy judges the same way."""
    import anthropic

    name = "_make_status_error"
    owner = next(cls for cls in anthropic.AsyncAnthropic.__mro__ if name in vars(cls))
    monkeypatch.delattr(owner, name)
    provider = AnthropicProvider(AnthropicSettings(api_key="test", base_url=fake.base_url, max_retries=1,
                                                   retry_base_seconds=0.01))
    fake.enqueue(Reply(body={"type": "error", "error": {"type": kind, "message": "said by the proxy"}}),
                 text("after the error"))
    try:
        if retried:
            assert (await provider.complete(REQUEST)).text == "after the error"
            assert provider._direct is None and len(fake.requests) == 2
        else:
            with pytest.raises(ProviderError) as info:
                await provider.complete(REQUEST)
            assert "said by the proxy" in str(info.value) and not info.value.retryable
            assert len(fake.requests) == 1
    finally:
        await provider.close()
