"""The kit's delivery rules against a scripted adapter: order, retry_after, backoff, permanent errors, and a
reply sent again resuming after its last sent chunk. Injected sleeps, no network."""

from __future__ import annotations

import pytest

from clawgate.agent.bus import OutboundMessage
from clawgate.channels.kit import Capabilities, DeliveryError, Target, Unconfirmed
from clawgate.channels.kit.delivery import Delivery
from tests.unit.channels.kit.support import MemoryAdapter, Sleeps, make_kit

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
    adapter.send_script = [DeliveryError("blocked", permanent=True, channel_down=True)]
    with pytest.raises(DeliveryError) as info:
        await delivery(adapter, kit, sleeps).send(OutboundMessage("memory", "c", "x"), Target("c"))
    assert info.value.permanent and sleeps.asked == [] and adapter.sent == []  # channel down: no notice tried


async def test_a_reply_sent_again_resumes_after_its_last_sent_chunk() -> None:
    kit, adapter, _ = make_kit()
    msg = OutboundMessage("memory", "c1", REPLY)
    adapter.send_script = [None, DeliveryError("gone", permanent=True, channel_down=True)]
    with pytest.raises(DeliveryError):
        await delivery(adapter, kit, Sleeps()).send(msg, Target("c1"))
    assert kit.store.chunks_sent(msg.id) == 1
    await delivery(adapter, kit, Sleeps()).send(msg, Target("c1"))
    assert [text for _, text in adapter.sent] == ["one two three four", "five six seven eight", "nine ten"]


async def test_each_part_carries_a_send_key_that_is_the_same_when_the_reply_is_sent_again() -> None:
    """A crash after the platform took a part and before it was recorded sends that part again: with the
    same send_key, which a platform with an idempotency key uses to recognise it."""
    kit, adapter, _ = make_kit()
    msg = OutboundMessage("memory", "c1", REPLY)
    await delivery(adapter, kit, Sleeps()).send(msg, Target("c1", "t", "m9"))
    first = [t.send_key for t, _ in adapter.sent]
    assert len(set(first)) == 3 and all(first)
    adapter.sent.clear()
    kit2, _, _ = make_kit()  # a fresh store: as if nothing had been recorded before the crash
    await delivery(adapter, kit2, Sleeps()).send(msg, Target("c1", "t", "m9"))
    assert [t.send_key for t, _ in adapter.sent] == first
    other = OutboundMessage("memory", "c1", REPLY)  # the same text in another reply is another message
    adapter.sent.clear()
    await delivery(adapter, kit2, Sleeps()).send(other, Target("c1", "t", "m9"))
    assert not set(first) & {t.send_key for t, _ in adapter.sent}


async def test_the_halves_of_a_part_refused_as_too_large_get_keys_of_their_own() -> None:
    kit, adapter, _ = make_kit(adapter=MeasuringAdapter)
    words = [f"word{i:03d}" for i in range(24)]
    await delivery(adapter, kit, Sleeps()).send(OutboundMessage("memory", "c1", " ".join(words)), Target("c1"))
    keys = [t.send_key for t, _ in adapter.sent]
    assert len(keys) >= 4 and len(set(keys)) == len(keys) and all(keys)


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


class FileAdapter(MemoryAdapter):
    capabilities = Capabilities(max_chars=20, files=True, max_file_bytes=10_000)

    async def send_file(self, target: Target, name: str, data: bytes, caption: str) -> str:
        self.sent.append((target, f"file {name}"))
        return str(len(self.sent))


async def test_a_file_and_the_line_sent_instead_of_one_carry_send_keys_of_their_own(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A file the platform took just before a crash is sent again after the restart under the same key (so
    Matrix, Discord, Mattermost and Feishu recognise it); the line sent instead of a file too large is keyed
    per chunk like a text reply."""
    from clawgate.agent.bus import store_file

    kit, adapter, _ = make_kit(adapter=FileAdapter)
    msg = OutboundMessage("memory", "c1", "the report", kind="file")
    store_file(tmp_path, msg, "r.txt", b"x" * 2048, fsync=False)
    await delivery(adapter, kit, Sleeps()).send(msg, Target("c1", reply_to="m9"))
    [(first, what)] = adapter.sent
    assert what == "file r.txt" and first.send_key == f"{msg.id}:file" and first.reply_to == "m9"
    kit2, _, _ = make_kit()  # nothing recorded before the crash: sent again, with the same key
    await delivery(adapter, kit2, Sleeps()).send(msg, Target("c1", reply_to="m9"))
    assert [t.send_key for t, _ in adapter.sent] == [first.send_key] * 2

    big = OutboundMessage("memory", "c1", "", kind="file")
    store_file(tmp_path, big, "big.bin", b"x" * 20_000, fsync=False)
    adapter.sent.clear()
    await delivery(adapter, kit, Sleeps()).send(big, Target("c1"))
    keys = [t.send_key for t, _ in adapter.sent]
    assert len(keys) >= 2 and keys == [f"{big.id}:{i}" for i in range(len(keys))]
    assert "big.bin" in " ".join(text for _, text in adapter.sent)


class MeasuringAdapter(MemoryAdapter):
    """Renders chunks of up to 200 characters, but the platform refuses any over 60 as too large (what
    an encrypted Matrix event does to a chunk measured before encryption)."""

    capabilities = Capabilities(max_chars=200)

    async def send_text(self, target: Target, text: str) -> str:
        if len(text) > 60:
            raise DeliveryError(f"M_TOO_LARGE: event of {len(text)} units", permanent=True, too_large=True)
        return await super().send_text(target, text)


async def test_a_chunk_refused_as_too_large_is_split_and_every_word_arrives_in_order() -> None:
    kit, adapter, _ = make_kit(adapter=MeasuringAdapter)
    words = [f"word{i:03d}" for i in range(24)]  # 191 characters: one rendered chunk, refused, then halves
    await delivery(adapter, kit, Sleeps()).send(OutboundMessage("memory", "c1", " ".join(words)), Target("c1", None, "m1"))
    assert " ".join(text for _, text in adapter.sent).split() == words
    assert all(len(text) <= 60 for _, text in adapter.sent) and len(adapter.sent) >= 4
    assert [t.reply_to for t, _ in adapter.sent][:2] == ["m1", None]  # only the first part quotes the question


async def test_a_permanent_failure_leaves_the_user_a_notice_saying_what_and_where() -> None:
    kit, adapter, _ = make_kit(adapter=MeasuringAdapter)
    adapter.send_script = [DeliveryError("send refused: M_FORBIDDEN the room is read-only", permanent=True)]
    msg = OutboundMessage("memory", "c1", "the answer", session_key="memory:c1")
    with pytest.raises(DeliveryError):
        await delivery(adapter, kit, Sleeps()).send(msg, Target("c1", "t1", "m1"))
    notice = " ".join(text for _, text in adapter.sent)
    assert "could not be delivered here" in notice and "M_FORBIDDEN the room is read-only" in notice
    assert "web page" in notice and "memory:c1" in notice and "the answer" not in notice
    assert {(t.thread_id, t.reply_to) for t, _ in adapter.sent} == {("t1", None)}
    keys = [t.send_key for t, _ in adapter.sent]  # keyed apart from the answer's parts, the same every time
    assert keys[0].startswith(f"{msg.id}:notice") and len(set(keys)) == len(keys)


async def test_a_notice_that_fails_too_is_logged_and_the_first_error_goes_on(caplog) -> None:  # type: ignore[no-untyped-def]
    kit, adapter, _ = make_kit()
    adapter.send_script = [DeliveryError("refused", permanent=True), DeliveryError("refused again", permanent=True)]
    with pytest.raises(DeliveryError, match="^refused$"):
        await delivery(adapter, kit, Sleeps()).send(OutboundMessage("memory", "c1", "x"), Target("c1"))
    assert adapter.sent == [] and "could not be sent either" in caplog.text
