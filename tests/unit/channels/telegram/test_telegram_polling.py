"""The receive loop and the send rules, in-process, with the real PTB Bot against FakeTelegram.

Where a failure cannot be produced by a real server on demand (a read timeout after the request
was sent, a refused connection), an httpx MockTransport is passed to PTB's own HTTPXRequest.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from typing import Any, AsyncIterator, Iterator

import httpx
import pytest
from telegram import Bot, Update
from telegram.request import HTTPXRequest

from clawgate.channels.base import DeliveryError
from clawgate.channels.telegram.delivery import Sender, Unconfirmed
from clawgate.channels.telegram.polling import Poller
from clawgate.channels.telegram.render import Chunk
from tests.fakes.telegram_api import FakeTelegram
from tests.waiting import DEFAULT_TIMEOUT, wait_until_async

CHAT = 77


class Offsets:
    def __init__(self) -> None:
        self.saved: list[int] = []

    def offset(self) -> int:
        return self.saved[-1] if self.saved else 0

    def save_offset(self, offset: int) -> None:
        self.saved.append(offset)


async def fast_sleep(seconds: float) -> None:
    await asyncio.sleep(min(seconds, 0.01))


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    with FakeTelegram() as server:
        yield server


@pytest.fixture
async def bot(fake: FakeTelegram) -> AsyncIterator[Bot]:
    async with Bot(fake.token, base_url=fake.base_url) as client:
        yield client


async def run_until(poller: Poller, condition, timeout: float = DEFAULT_TIMEOUT) -> asyncio.Task[None]:
    task = asyncio.create_task(poller.run())

    def met() -> bool:
        assert not task.done() or condition(), "poller stopped"
        return condition()
    await wait_until_async(met, "the poller to handle the updates", timeout=timeout)
    return task


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_offset_is_confirmed_only_after_each_update_was_handled(bot: Bot, fake: FakeTelegram) -> None:
    offsets, seen = Offsets(), []

    async def handle(update: Update) -> None:
        assert fake.confirmed_offset <= update.update_id  # Telegram still holds it while we work
        assert offsets.offset() <= update.update_id
        seen.append(update.message.text)

    ids = [fake.inject_message(CHAT, f"m{i}") for i in range(3)]
    task = await run_until(Poller(bot, handle, offsets, timeout=1), lambda: len(seen) == 3)
    await fake.wait_for_async(lambda: fake.confirmed_offset == ids[-1] + 1)
    await stop(task)
    assert seen == ["m0", "m1", "m2"] and offsets.saved == [i + 1 for i in ids]


async def test_a_storage_failure_leaves_the_update_unconfirmed_and_it_is_retried(bot: Bot, fake: FakeTelegram) -> None:
    offsets, seen, failures = Offsets(), [], [1]

    async def handle(update: Update) -> None:
        if failures:
            failures.pop()
            raise sqlite3.OperationalError("database is locked")
        seen.append(update.message.text)

    first = fake.inject_message(CHAT, "a")
    fake.inject_message(CHAT, "b")
    task = await run_until(Poller(bot, handle, offsets, timeout=1, sleep=fast_sleep), lambda: len(seen) == 2)
    await stop(task)
    assert seen == ["a", "b"] and offsets.saved[0] == first + 1  # nothing saved for the failed attempt


async def test_a_handler_bug_skips_only_that_update(bot: Bot, fake: FakeTelegram, caplog) -> None:
    offsets, seen = Offsets(), []

    async def handle(update: Update) -> None:
        if update.message.text == "poison":
            raise ValueError("cannot read this")
        seen.append(update.message.text)

    fake.inject_message(CHAT, "poison")
    last = fake.inject_message(CHAT, "fine")
    task = await run_until(Poller(bot, handle, offsets, timeout=1), lambda: seen == ["fine"])
    await stop(task)
    assert offsets.offset() == last + 1
    assert "could not be handled" in caplog.text


class StallingBot:
    """The first getUpdates never returns (a dead connection); later ones go to the real Bot."""

    def __init__(self, bot: Bot) -> None:
        self.bot = bot
        self.calls = 0

    async def get_updates(self, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            await asyncio.Event().wait()
        return await self.bot.get_updates(**kwargs)


async def test_a_stalled_poll_is_detected_and_restarted(bot: Bot, fake: FakeTelegram) -> None:
    seen: list[str] = []

    async def handle(update: Update) -> None:
        seen.append(update.message.text)

    poller = Poller(StallingBot(bot), handle, Offsets(), timeout=1, stall_after=0.3, check_every=0.05)
    fake.inject_message(CHAT, "are you there?")
    task = await run_until(poller, lambda: seen == ["are you there?"])
    await stop(task)
    assert poller.restarts == 1


async def test_a_rejected_token_stops_polling(fake: FakeTelegram, caplog) -> None:
    async def handle(update: Update) -> None:
        raise AssertionError("no update expected")

    wrong = Bot("999999:WRONG", base_url=fake.base_url)
    task = asyncio.create_task(Poller(wrong, handle, Offsets(), timeout=1).run())
    await asyncio.wait_for(task, 5)
    assert "token was rejected" in caplog.text


# sending --------------------------------------------------------------------------------------------
ME = {"id": 1, "is_bot": True, "first_name": "Test", "username": "t_bot"}


def mock_bot(fail: type[httpx.TransportError], counter: list[str]) -> Bot:
    """A real PTB Bot whose transport answers getMe and fails every sendMessage with `fail`."""

    def handler(request: httpx.Request) -> httpx.Response:
        method = request.url.path.rsplit("/", 1)[-1]
        counter.append(method)
        if method == "getMe":
            return httpx.Response(200, json={"ok": True, "result": ME})
        raise fail("simulated", request=request)

    request = HTTPXRequest(httpx_kwargs={"transport": httpx.MockTransport(handler)})
    return Bot("1:TEST", base_url="http://telegram.invalid/bot", request=request)


async def test_a_read_timeout_after_sending_is_not_resent() -> None:
    calls: list[str] = []
    async with mock_bot(httpx.ReadTimeout, calls) as bot:
        with pytest.raises(Unconfirmed):
            await Sender(bot, retries=3, sleep=fast_sleep).send_chunk(CHAT, Chunk("hello"))
    assert calls.count("sendMessage") == 1  # it may have arrived: sending again could duplicate it


async def test_a_refused_connection_is_retried_a_bounded_number_of_times() -> None:
    calls: list[str] = []
    async with mock_bot(httpx.ConnectError, calls) as bot:
        with pytest.raises(DeliveryError) as info:
            await Sender(bot, retries=3, sleep=fast_sleep).send_chunk(CHAT, Chunk("hello"))
    assert calls.count("sendMessage") == 4 and not info.value.permanent


async def test_server_errors_retry_and_bad_requests_do_not(bot: Bot, fake: FakeTelegram) -> None:
    sender = Sender(bot, retries=3, sleep=fast_sleep)
    fake.fail_next("sendMessage", status=500, times=2)
    message = await sender.send_chunk(CHAT, Chunk("made it"))
    assert message.text == "made it" and fake.messages_to(CHAT) == ["made it"]
    assert sum(1 for name, _ in fake.calls if name == "sendMessage") == 3
    for status, description in ((400, "Bad Request: chat not found"), (403, None)):
        fake.fail_next("sendMessage", status=status, description=description)
        before = len(fake.calls)
        with pytest.raises(DeliveryError) as info:
            await sender.send_chunk(CHAT, Chunk("nope"))
        assert info.value.permanent and len(fake.calls) == before + 1


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # raised inside PTB's own RetryAfter
async def test_a_long_flood_wait_is_handed_back_to_the_dispatcher(bot: Bot, fake: FakeTelegram) -> None:
    fake.fail_next("sendMessage", status=429, retry_after=300)
    with pytest.raises(DeliveryError) as info:
        await Sender(bot, max_retry_after=60, sleep=fast_sleep).send_chunk(CHAT, Chunk("later"))
    assert info.value.retry_after == 300 and not info.value.permanent
    assert json.dumps(fake.messages_to(CHAT)) == "[]"
