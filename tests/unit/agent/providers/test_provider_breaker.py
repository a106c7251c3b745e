"""The per-provider circuit breaker: its state machine on an injected clock, and the chain using it."""

from __future__ import annotations

import asyncio

import pytest

from clawgate.agent.providers.base import ModelRequest, ModelResponse, ProviderError
from clawgate.agent.providers.breaker import CircuitBreaker
from clawgate.agent.providers.chain import ProviderChain
from tests.waiting import wait_until_async

REQUEST = ModelRequest(model="m", system=[], messages=[{"role": "user", "content": "hi"}])


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def wall(self) -> float:
        return 1_700_000_000.0 + self.now


def breaker(clock: Clock, events: list, threshold: int = 3, cooldown: float = 30.0) -> CircuitBreaker:
    return CircuitBreaker("anthropic", threshold=threshold, cooldown=cooldown, clock=clock, wall=clock.wall,
                          on_change=lambda kind, fields: events.append((kind, fields)))


def test_opens_after_threshold_consecutive_failures_only():
    clock, events = Clock(), []
    b = breaker(clock, events)
    b.failure("529"), b.failure("529")
    b.success()  # a success in between resets the count
    b.failure("529"), b.failure("529")
    assert b.state == "closed" and b.allow() and events == []
    b.failure("overloaded")
    assert b.state == "open" and not b.allow()
    assert events == [("breaker_open", {"provider": "anthropic", "failures": 3, "trial": False, "error": "overloaded",
                                        "cooldownSeconds": 30.0, "retryAt": clock.wall() + 30.0})]
    snap = b.snapshot()
    assert snap["state"] == "open" and snap["retryAt"] == clock.wall() + 30.0 and snap["lastError"] == "overloaded"


def test_cooldown_then_one_trial_closes_on_success():
    clock, events = Clock(), []
    b = breaker(clock, events, threshold=1)
    b.failure("down")
    clock.now += 29.9
    assert not b.allow() and b.state == "open" and b.retry_in() == pytest.approx(0.1)
    clock.now += 0.1
    assert b.state == "half_open"  # what status shows: the next call is the trial
    assert b.allow()  # the trial
    assert not b.allow()  # only one trial at a time
    b.success()
    assert b.state == "closed" and b.failures == 0 and b.allow()
    assert [kind for kind, _ in events] == ["breaker_open", "breaker_close"]


def test_failed_trial_opens_for_another_full_cooldown():
    clock, events = Clock(), []
    b = breaker(clock, events, threshold=2)
    b.failure("x"), b.failure("x")
    clock.now += 30
    assert b.allow()
    b.failure("still down")
    assert b.state == "open" and b.retry_in() == 30.0
    assert events[-1][0] == "breaker_open" and events[-1][1]["trial"] is True
    clock.now += 15
    assert not b.allow()


def test_released_trial_lets_the_next_call_be_the_trial():
    clock, events = Clock(), []
    b = breaker(clock, events, threshold=1)
    b.failure("x")
    clock.now += 30
    assert b.allow() and not b.allow()
    b.release()  # e.g. the trial was a request the provider rejected (400): no verdict
    assert b.state == "half_open" and b.allow()


def test_describe_is_one_line_with_the_retry_time():
    clock, events = Clock(), []
    b = breaker(clock, events, threshold=1, cooldown=90)
    b.failure("HTTP 529 from the model API")
    line = b.describe()
    assert line.startswith("anthropic is paused until ") and "UTC (in 90 s)" in line
    assert "1 failed call(s): HTTP 529 from the model API" in line and "\n" not in line


class Scripted:
    """A provider answering from a list of outcomes (an exception or a text), counting its calls."""

    def __init__(self, name: str, *outcomes: Exception | str) -> None:
        self.name, self.outcomes, self.calls = name, list(outcomes), 0

    async def complete(self, request, on_text=None) -> ModelResponse:
        self.calls += 1
        outcome = self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]
        if isinstance(outcome, Exception):
            raise outcome
        return ModelResponse(content=[{"type": "text", "text": outcome}])

    async def close(self) -> None:
        return None


OVERLOADED = ProviderError("overloaded", retryable=True)


async def test_chain_skips_an_open_provider_without_calling_it_and_tries_it_after_cooldown():
    clock, events = Clock(), []
    first, second = Scripted("anthropic", OVERLOADED, OVERLOADED, "back"), Scripted("openai", "local")
    chain = ProviderChain([first, second], threshold=2, cooldown=60, clock=clock, wall=clock.wall,
                          on_breaker=lambda kind, fields: events.append(kind))
    for _ in range(2):
        assert (await chain.complete(REQUEST)).text == "local"
    assert first.calls == 2 and events == ["breaker_open"]
    assert (await chain.complete(REQUEST)).text == "local"
    assert first.calls == 2  # skipped while open
    assert chain.breaker_states()[0]["state"] == "open" and chain.breaker_states()[1]["state"] == "closed"
    clock.now += 60
    assert (await chain.complete(REQUEST)).text == "back"
    assert first.calls == 3 and events == ["breaker_open", "breaker_close"]


async def test_rejected_requests_never_trip_the_breaker():
    clock = Clock()
    first = Scripted("anthropic", ProviderError("The model API rejected the request (HTTP 400): bad"))
    chain = ProviderChain([first, Scripted("openai", "unused")], threshold=1, clock=clock, wall=clock.wall)
    for _ in range(5):
        with pytest.raises(ProviderError, match="HTTP 400"):
            await chain.complete(REQUEST)
    assert first.calls == 5 and chain.breaker_states()[0]["state"] == "closed"


async def test_every_provider_paused_answers_at_once_in_one_line():
    clock = Clock()
    chain = ProviderChain([Scripted("anthropic", OVERLOADED), Scripted("openai", ProviderError("refused", retryable=True))],
                          threshold=1, cooldown=120, clock=clock, wall=clock.wall)
    with pytest.raises(ProviderError) as first:
        await chain.complete(REQUEST)
    assert str(first.value).startswith("Every model provider failed")
    calls = [p.calls for p in chain.providers]
    with pytest.raises(ProviderError) as info:
        await asyncio.wait_for(chain.complete(REQUEST), 1)
    message = str(info.value)
    assert [p.calls for p in chain.providers] == calls  # nobody was called
    assert message.startswith("No model provider is available right now: anthropic is paused until ")
    assert "openai is paused until" in message and "(in 120 s)" in message and "\n" not in message


async def test_a_cancelled_trial_frees_the_slot():
    clock = Clock()

    class Hanging(Scripted):
        async def complete(self, request, on_text=None) -> ModelResponse:
            self.calls += 1
            if self.calls == 1:
                raise OVERLOADED
            await asyncio.sleep(3600)
            raise AssertionError

    first = Hanging("anthropic", "x")
    chain = ProviderChain([first, Scripted("openai", "local")], threshold=1, cooldown=10, clock=clock, wall=clock.wall)
    await chain.complete(REQUEST)
    clock.now += 10
    trial = asyncio.create_task(chain.complete(REQUEST))
    await wait_until_async(lambda: first.calls >= 2, "the trial call")
    assert (await chain.complete(REQUEST)).text == "local"  # a second call meanwhile skips the trial
    assert first.calls == 2
    trial.cancel()
    with pytest.raises(asyncio.CancelledError):
        await trial
    assert chain.breakers[0] is not None and chain.breakers[0].allow()  # the next call may be the trial


async def test_breakers_off_try_every_provider_every_time():
    first = Scripted("anthropic", OVERLOADED)
    chain = ProviderChain([first, Scripted("openai", "local")], threshold=None)
    for _ in range(5):
        await chain.complete(REQUEST)
    assert first.calls == 5 and chain.breaker_states()[0]["state"] == "closed"
