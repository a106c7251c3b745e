"""The kit's delivery rules against a scripted adapter: order, retry_after, backoff, permanent errors, and a
reply sent again resuming after its last sent chunk. Injected sleeps, no network."""

from __future__ import annotations

import pytest

from clawgate.agent.bus import OutboundMessage
from clawgate.channels.kit import DeliveryError, Target, Unconfirmed
from clawgate.channels.kit.delivery import Delivery
from tests.unit.channels.kit.support import Sleeps, make_kit

REPLY = "one two three four five six seven eight nine ten"  # 48 characters: three chunks of up to 20


def delivery(adapter, kit, sleeps: Sleeps, **options) -> Delivery:  # type: ignore[no-untyped-def]
    return Delivery(adapter, kit.store, kit.log, base_delay=1.0, sleep=sleeps, **options)


async def test_chunks_go_in_order_and_only_the_first_quotes_the_question() -> None:
    kit, adapter, _ = make_kit()
    await delivery(adapter, kit, Sleeps()).send(OutboundMessage("memory", "c1", REPLY), Target("c1", "t", "m9"))
    assert [text for _, text in adapter.sent] == ["one two three four", "five six seven eight", "nine ten"]
    assert [t.reply_to for t, _ in adapter.sent] == ["m9", None, None]
    assert {t.thread_id for t, _ in adapter.sent} == {"t"}


async def test_retry_after_is_waited_out_and_other_failures_back_off_a_bounded_number_of_times() -> None:
    kit, adapter, _ = make_kit()
    sleeps = Sleeps()
    adapter.send_script = [DeliveryError("429", retry_after=7.0), DeliveryError("502"), DeliveryError("502")]
    await delivery(adapter, kit, sleeps, retries=3).send(OutboundMessage("memory", "c1", "hi"), Target("c1"))
    assert sleeps.asked == [7.0, 1.0, 2.0] and [text for _, text in adapter.sent] == ["hi"]
    adapter.send_script = [DeliveryError("502")] * 4
    with pytest.raises(DeliveryError, match="gave up after 3 retries") as info:
        await delivery(adapter, kit, Sleeps(), retries=3).send(OutboundMessage("memory", "c1", "later"), Target("c1"))
    assert not info.value.permanent


async def test_a_long_rate_limit_and_a_permanent_error_go_back_to_the_dispatcher_at_once() -> None:
    kit, adapter, _ = make_kit()
    sleeps = Sleeps()
    adapter.send_script = [DeliveryError("flood", retry_after=600.0)]
    with pytest.raises(DeliveryError) as info:
        await delivery(adapter, kit, sleeps, max_retry_after=120.0).send(OutboundMessage("memory", "c", "x"), Target("c"))
    assert info.value.retry_after == 600.0 and sleeps.asked == []
    adapter.send_script = [DeliveryError("blocked", permanent=True)]
    with pytest.raises(DeliveryError) as info:
        await delivery(adapter, kit, sleeps).send(OutboundMessage("memory", "c", "x"), Target("c"))
    assert info.value.permanent and sleeps.asked == [] and adapter.sent == []


async def test_a_reply_sent_again_resumes_after_its_last_sent_chunk() -> None:
    kit, adapter, _ = make_kit()
    msg = OutboundMessage("memory", "c1", REPLY)
    adapter.send_script = [None, DeliveryError("gone", permanent=True)]
    with pytest.raises(DeliveryError):
        await delivery(adapter, kit, Sleeps()).send(msg, Target("c1"))
    assert kit.store.chunks_sent(msg.id) == 1
    await delivery(adapter, kit, Sleeps()).send(msg, Target("c1"))
    assert [text for _, text in adapter.sent] == ["one two three four", "five six seven eight", "nine ten"]


async def test_an_unconfirmed_chunk_counts_as_sent() -> None:
    kit, adapter, _ = make_kit()
    msg = OutboundMessage("memory", "c1", REPLY)
    adapter.send_script = [Unconfirmed("read timeout after sending")]
    await delivery(adapter, kit, Sleeps()).send(msg, Target("c1"))
    assert [text for _, text in adapter.sent] == ["five six seven eight", "nine ten"]  # not resent: no duplicate
    assert kit.store.chunks_sent(msg.id) == 3


async def test_a_file_on_a_channel_without_files_becomes_one_line_sent_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from clawgate.agent.bus import store_file

    kit, adapter, _ = make_kit()
    assert not adapter.capabilities.files
    msg = OutboundMessage("memory", "c1", "", kind="file")
    store_file(tmp_path, msg, "r.txt", b"x" * 2048, fsync=False)
    await delivery(adapter, kit, Sleeps()).send(msg, Target("c1"))
    first = list(adapter.sent)
    await delivery(adapter, kit, Sleeps()).send(msg, Target("c1"))  # sent again (a restart): not repeated
    assert adapter.sent == first
    line = " ".join(text for _, text in first)  # this adapter's chunks are 20 characters at most
    assert "r.txt" in line and "could not be sent" in line and "cannot carry files" in line
