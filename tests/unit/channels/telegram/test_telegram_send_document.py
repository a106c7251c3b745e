"""sendDocument through PTB against the fake Bot API: a document arrives whole; what Telegram refuses
(a file over 50 MB: HTTP 413; an empty one) is a permanent DeliveryError, never retried forever."""

from __future__ import annotations

from typing import AsyncIterator, Iterator

import pytest
from telegram import Bot
from telegram.request import HTTPXRequest

from clawgate.channels.base import DeliveryError
from clawgate.channels.telegram.delivery import MAX_FILE_BYTES, Sender
from tests.fakes.telegram_api import FakeTelegram


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    with FakeTelegram() as server:
        yield server


@pytest.fixture
async def sender(fake: FakeTelegram) -> AsyncIterator[Sender]:
    request = HTTPXRequest(write_timeout=60.0, read_timeout=60.0)  # a 50 MB upload on a loaded machine
    async with Bot(fake.token, base_url=fake.base_url, request=request) as bot:
        yield Sender(bot, retries=0, max_retry_after=0)


async def test_a_document_arrives_with_its_name_and_caption(fake: FakeTelegram, sender: Sender) -> None:
    sent = await sender.send_document(4242, "r.csv", b"a,b\n", "the numbers")
    [doc] = fake.documents
    assert (doc["chat_id"], doc["file_name"], doc["content"], doc["caption"]) == (4242, "r.csv", b"a,b\n",
                                                                                  "the numbers")
    assert sent.document is not None and sent.document.file_name == "r.csv"


async def test_what_telegram_refuses_is_permanent(fake: FakeTelegram, sender: Sender) -> None:
    with pytest.raises(DeliveryError) as too_big:
        await sender.send_document(4242, "big.bin", b"x" * (MAX_FILE_BYTES + 1), "")
    assert too_big.value.permanent and "big.bin" in str(too_big.value)
    with pytest.raises(DeliveryError) as empty:
        await sender.send_document(4242, "empty.txt", b"", "")
    assert empty.value.permanent and "non-empty" in str(empty.value)
    assert fake.documents == []
