"""The kit's intake against an in-memory inbox: what is dropped, what is a command (answered once per
platform message), where files go and when they are refused, and the owner's shared session."""

from __future__ import annotations

from pathlib import Path

from clawgate.channels.kit import AccessSettings, Incoming, IncomingFile, Sender
from clawgate.channels.kit.intake import REFUSAL
from clawgate.channels.kit.markdown import to_plain
from tests.unit.channels.kit.support import make_kit, settle

OWNER = Sender("1", "boss")
GUEST = Sender("2", "guest")


def message(text: str, *, sender: Sender = OWNER, mid: str = "10", private: bool = True, addressed: bool = True,
            **extra) -> Incoming:  # type: ignore[no-untyped-def]
    return Incoming(message_id=mid, chat_id="c1" if private else "g1", sender=sender, private=private, text=text,
                    addressed=addressed, **extra)


async def test_bots_other_bots_commands_and_unaddressed_group_talk_never_reach_the_agent() -> None:
    kit, adapter, inbox = make_kit(settings=AccessSettings(owner=["1"], dm_policy="open"))
    kit.bot_name = "mybot"
    assert not await kit.receive(message("hi", sender_is_bot=True))
    assert not await kit.receive(message("/new@otherbot", mid="11"))
    assert not await kit.receive(message("just talking", private=False, addressed=False, mid="12"))
    assert inbox.messages == []
    assert await kit.receive(message("hello @mybot", private=False, mid="13"))
    [msg] = inbox.messages
    assert (msg.id, msg.session_key, msg.metadata["owner"]) == ("memory:g1:13", "memory:g1", True)


async def test_a_command_is_answered_once_per_platform_message() -> None:
    kit, adapter, inbox = make_kit(settings=AccessSettings(owner=["1"]))
    for _ in range(2):  # the same event delivered twice
        assert not await kit.receive(message("/new", mid="20"))
    await settle(lambda: adapter.sent, "the command's answer")
    await kit.receive(message("/new", mid="21"))
    await settle(lambda: len(adapter.sent) == 2, "the second command's answer")
    assert [text for _, text in adapter.sent] == ["/new answered", "/new answered"] and inbox.messages == []


async def test_a_stranger_is_refused_once_then_silence() -> None:
    kit, adapter, inbox = make_kit(settings=AccessSettings(dm_policy="allowlist"))
    await kit.receive(message("let me in", sender=GUEST, mid="30"))
    await kit.receive(message("please", sender=GUEST, mid="31"))
    await settle(lambda: adapter.sent, "the refusal")
    said = to_plain(" ".join(text for _, text in adapter.sent))  # in chunks of 20, escaped as Markdown
    assert said == REFUSAL and inbox.messages == []


async def test_files_are_saved_in_the_senders_workspace_and_a_large_one_is_refused_before_fetching(tmp_path: Path) -> None:
    kit, adapter, inbox = make_kit(settings=AccessSettings(owner=["1"], max_file_bytes=100))
    object.__setattr__(kit.services, "workspace", tmp_path)
    fetched: list[str] = []

    def file(name: str, data: bytes, declared: int | None) -> IncomingFile:
        async def fetch() -> bytes:
            fetched.append(name)
            return data
        return IncomingFile(name, declared, "text/plain", fetch)

    await kit.receive(message("see attached", mid="40", files=(file("../../notes.txt", b"hello", 5),)))
    [msg] = inbox.messages
    assert (tmp_path / "inbox" / "40-notes.txt").read_bytes() == b"hello"
    assert "saved in the workspace as inbox/40-notes.txt" in msg.text and msg.text.startswith("see attached")
    await kit.receive(message("", mid="41", files=(file("big.bin", b"x" * 500, 500),)))
    await kit.receive(message("", mid="42", files=(file("liar.bin", b"x" * 500, 10),)))  # declared small, is not
    # each refusal arrives in chunks of 20 characters (the two messages' chunks may interleave)
    starts = lambda: [text for _, text in adapter.sent if text.startswith("That file is")]  # noqa: E731
    await settle(lambda: len(starts()) == 2, "two refusals")
    assert fetched == ["../../notes.txt", "liar.bin"] and len(inbox.messages) == 1


async def test_the_owner_may_share_one_session_across_channels() -> None:
    kit, adapter, inbox = make_kit(settings=AccessSettings(owner=["1"], allow_from=["2"]))
    object.__setattr__(kit.services, "owner_shared_session", True)
    await kit.receive(message("mine", mid="50"))
    await kit.receive(message("theirs", sender=GUEST, mid="51"))
    await kit.receive(message("in the group", private=False, mid="52"))
    assert [m.session_key for m in inbox.messages] == ["owner:dm", "memory:c1", "memory:g1"]


async def test_a_command_says_who_sent_it_where_and_its_answer_lands_on_it() -> None:
    """The router learns the sender, whether the conversation is shared and the command's own message;
    the answer replies to that message (Discord answers that interaction, no other)."""
    kit, adapter, inbox = make_kit(settings=AccessSettings(owner=["1"], allow_from=["2"]))
    asked: list[tuple] = []

    def commands(name, key, args, user, **how):  # type: ignore[no-untyped-def]
        asked.append((name, key, user, how["shared"], how["reply_to"]))
        return f"answer to {how['reply_to']}"

    object.__setattr__(kit.services, "commands", commands)
    await kit.receive(message("/new", sender=GUEST, private=False, mid="60"))
    await kit.receive(message("/new", private=False, mid="61"))
    await kit.receive(message("/new", sender=GUEST, mid="62"))
    await settle(lambda: len(adapter.sent) == 3, "three answers")
    assert asked == [("new", "memory:g1", "memory:2", True, "60"), ("new", "memory:g1", "", True, "61"),
                     ("new", "memory:c1", "memory:2", False, "62")]
    assert sorted((target.reply_to, text) for target, text in adapter.sent) == [
        ("60", "answer to 60"), ("61", "answer to 61"), ("62", "answer to 62")]
