"""Robot messages (the SDK's ChatbotMessage) -> Incoming: who wrote (senderStaffId, else senderId; never the
nickname), which chat an answer goes to (the person in 1:1, the conversation in a group), and when a group
message addresses the robot."""

from __future__ import annotations

from typing import Any

from dingtalk_stream import ChatbotMessage

from clawgate.channels.dingtalk.events import incoming


def robot_message(text: str = "hello", *, group: bool = False, at: bool = True, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "conversationId": "cidGROUP==" if group else "cid1to1", "msgId": "msgA1", "senderNick": "Alice",
        "senderStaffId": "manager4321", "senderId": "$:LWCP_v1:$abc", "conversationType": "2" if group else "1",
        "sessionWebhook": "http://127.0.0.1:1/robot/sendBySession?session=x", "sessionWebhookExpiredTime": 1,
        "msgtype": "text", "text": {"content": text}, "createAt": 1700000000000}
    if group:
        body["isInAtList"] = at
    return {**body, **extra}


async def fetch(code: str) -> bytes:
    return f"bytes of {code}".encode()


def parse(body: dict[str, Any]) -> Any:
    return incoming(ChatbotMessage.from_dict(body), body, fetch)


def test_a_one_to_one_message_is_private_addressed_and_the_chat_is_the_person() -> None:
    msg = parse(robot_message("hello"))
    assert msg.private and msg.addressed and msg.chat_id == "manager4321" and msg.message_id == "msgA1"
    assert msg.sender.user_id == "manager4321" and msg.sender.display == "Alice" and msg.text == "hello"


def test_the_nickname_is_never_the_identity() -> None:
    msg = parse(robot_message(senderNick="manager4321 the owner"))
    assert msg.sender.user_id == "manager4321" and msg.sender.username == "manager4321"
    assert "owner" not in (msg.sender.username or "")


def test_a_sender_outside_the_organisation_is_named_by_the_app_scoped_id() -> None:
    body = robot_message()
    del body["senderStaffId"]
    msg = parse(body)
    assert msg.sender.user_id == "$:LWCP_v1:$abc" and msg.chat_id == "$:LWCP_v1:$abc"


def test_a_group_message_is_the_conversations_and_addressed_only_when_the_robot_is_mentioned() -> None:
    mentioned = parse(robot_message(" what is new? ", group=True))
    assert not mentioned.private and mentioned.addressed and mentioned.chat_id == "cidGROUP=="
    assert mentioned.text == "what is new?"
    assert not parse(robot_message("among ourselves", group=True, at=False)).addressed


async def test_rich_text_is_read_and_pictures_and_files_come_as_files_fetched_by_their_download_code() -> None:
    rich = parse(robot_message(msgtype="richText", content={"richText": [{"text": "see "}, {"downloadCode": "d1",
                                                                        "type": "picture"}, {"text": "this"}]}))
    assert rich.text == "see this" and not rich.unreadable and len(rich.files) == 1
    assert await rich.files[0].fetch() == b"bytes of d1" and rich.files[0].kind == "file"
    picture = parse(robot_message(msgtype="picture", content={"downloadCode": "d2"}))
    assert picture.text == "" and not picture.unreadable and [f.name for f in picture.files] == ["picture"]
    document = parse(robot_message(msgtype="file", content={"downloadCode": "d3", "fileName": "plan.pdf"}))
    assert [f.name for f in document.files] == ["plan.pdf"] and await document.files[0].fetch() == b"bytes of d3"
    assert parse(robot_message(msgtype="video", content={"duration": 3})).unreadable


def test_a_voice_message_is_read_as_dingtalks_own_transcription() -> None:
    voice = parse(robot_message(msgtype="audio", content={"duration": 4000, "downloadCode": "d",
                                                          "recognition": "call me back"}))
    assert voice.text == "[voice message, transcribed by DingTalk] call me back" and not voice.unreadable
    assert parse(robot_message(msgtype="audio", content={"duration": 900, "downloadCode": "d"})).unreadable


def test_a_message_naming_no_sender_is_dropped() -> None:
    body = robot_message()
    del body["senderStaffId"], body["senderId"]
    assert parse(body) is None


def test_a_session_key_of_an_outside_senders_chat_reads_back_whole() -> None:
    from clawgate.channels.dingtalk.adapter import DingTalkAdapter
    from clawgate.channels.kit.keys import parse_session_key, session_key

    for chat in ("manager4321", "cidGROUP==", "$:LWCP_v1:$abc"):
        assert parse_session_key(session_key("dingtalk", chat), "dingtalk", DingTalkAdapter.split_chat) == (chat, None)
