"""The circuit breaker in the real daemon, against the fake Messages API and the fake OpenAI API:
a provider failing 529 trips it and later turns skip it (the fake receives nothing), a trial after
the cooldown closes it, 400s never trip it, and with every provider paused the answer is one line
at once. State in `status` and `clawgate status`, changes as breaker_open / breaker_close events."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from tests.fakes.anthropic_api import FakeAnthropic, text
from tests.fakes.openai_api import FakeOpenAI
from tests.waiting import wait_until_async

DEADLINE = 90.0


def breaker_env(threshold: int, cooldown: float, **extra: str) -> dict[str, str]:
    return {"CLAWGATE_PROVIDERS__ANTHROPIC__MAX_RETRIES": "0",
            "CLAWGATE_PROVIDERS__BREAKER__FAILURE_THRESHOLD": str(threshold),
            "CLAWGATE_PROVIDERS__BREAKER__COOLDOWN_SECONDS": str(cooldown), **extra}


async def breaker_state(client: Any, name: str = "anthropic") -> dict[str, Any]:
    providers = (await client.request("status"))["providers"]
    return next(p for p in providers if p["name"] == name)


async def wait_for_state(client: Any, state: str, name: str = "anthropic") -> dict[str, Any]:
    async def reached() -> dict[str, Any] | None:
        current = await breaker_state(client, name)
        return current if current["state"] == state else None
    return await wait_until_async(reached, f"{name} to become {state}", timeout=DEADLINE, interval=0.2)


async def test_529s_trip_the_breaker_the_next_turn_skips_it_and_a_trial_closes_it(daemon_factory, fake_model: FakeAnthropic):
    with FakeOpenAI() as local:
        daemon = daemon_factory(breaker_env(2, 8, CLAWGATE_PROVIDERS__OPENAI_COMPAT=json.dumps(
            {"base_url": local.base_url, "model": "local"})))
        events: list[dict[str, Any]] = []
        async with daemon.client() as client, daemon.client() as watcher:
            async def watch() -> None:
                async for frame in watcher.events():
                    if frame["event"].startswith("breaker_"):
                        events.append(frame)

            watching = asyncio.create_task(watch())
            fake_model.fail_next(529, times=2)
            for n in (1, 2):
                final = await client.chat(f"turn {n}")
                assert final["state"] == "final" and final["text"].endswith(f"turn {n}")  # the local model answered
            assert len(fake_model.requests) == 2
            opened = await wait_for_state(client, "open")
            assert opened["failures"] == 2 and opened["retryAt"] > time.time()

            final = await client.chat("turn 3")
            assert final["state"] == "final" and final["text"].endswith("turn 3")
            # Still open when the turn had ended, so it was open throughout: Anthropic saw nothing.
            assert (await breaker_state(client))["state"] == "open"
            assert len(fake_model.requests) == 2 and len(local.requests) == 3

            shown = daemon.cli("status")
            assert shown.returncode == 0, shown.stderr
            assert "anthropic: open, next try " in shown.stdout and "2 failed call(s) in a row" in shown.stdout
            assert "openai: closed" in shown.stdout

            await wait_for_state(client, "half_open")  # the cooldown has passed: the next call is the trial
            fake_model.enqueue(text("anthropic is back"))
            final = await client.chat("turn 4")
            assert final["text"] == "anthropic is back"
            assert len(fake_model.requests) == 3 and len(local.requests) == 3
            closed = await breaker_state(client)
            assert closed["state"] == "closed" and closed["failures"] == 0
            await wait_until_async(lambda: len(events) >= 2, "the open and close events", timeout=DEADLINE)
            watching.cancel()
        assert [e["event"] for e in events] == ["breaker_open", "breaker_close"]
        assert events[0]["payload"]["provider"] == "anthropic" and events[0]["payload"]["failures"] == 2
    trace = (daemon.home / "state/traces/_daemon.jsonl").read_text().splitlines()
    kinds = [json.loads(line)["type"] for line in trace]
    assert kinds.count("breaker_open") == 1 and kinds.count("breaker_close") == 1


async def test_every_provider_paused_answers_one_clear_line_at_once(daemon_factory, fake_model: FakeAnthropic):
    daemon = daemon_factory(breaker_env(1, 600))
    fake_model.fail_next(529)
    async with daemon.client() as client:
        first = await client.chat("hello")
        assert first["state"] == "error" and "Every model provider failed" in first["text"]
        second = await asyncio.wait_for(client.chat("hello again"), DEADLINE)  # answered, not hung
        assert second["state"] == "error"
        line = second["text"]
        assert line.startswith("No model provider is available right now: anthropic is paused until ")
        assert "(in " in line and "Send your message again after that." in line and "\n" not in line
        assert "after 1 failed call(s): overloaded_error from the model API." in line
        assert len(fake_model.requests) == 1  # the paused provider was not asked


async def test_rejected_requests_do_not_trip_the_breaker(daemon_factory, fake_model: FakeAnthropic):
    daemon = daemon_factory(breaker_env(1, 600))
    fake_model.fail_next(400, times=3)
    async with daemon.client() as client:
        for n in range(3):
            final = await client.chat(f"bad {n}")
            assert final["state"] == "error" and "HTTP 400" in final["text"]
            assert (await breaker_state(client))["state"] == "closed"
        assert (await client.chat("good"))["text"] == "echo: good"
    assert len(fake_model.requests) == 4  # every one of them reached the API
