"""Approval prompts show the whole command and reason, as they are, in as many messages as the platform needs."""

from __future__ import annotations

import re

from clawgate.agent.core.visible import visible
from clawgate.channels.kit.approvals import OUTCOME_ROOM, cut, prompt_messages

COMMAND = "exec " + "".join(f"echo {i} & < > * _ \\ ` @everyone <@U123> @room \u202e{i} \u200b" for i in range(120))
REQUEST = {"tool": "exec", "summary": COMMAND, "reason": "'echo' is not on the exec allowlist (tools.exec.allowlist)"}
FENCED = re.compile(r"^(`{3,})\n(.*?)\n\1$", re.S | re.M)


def fits_under(limit: int):  # type: ignore[no-untyped-def]
    return lambda markdown: len(markdown) <= limit


def command_shown(messages: list[str]) -> str:
    return "".join(match.group(2) for message in messages for match in FENCED.finditer(message))


def test_a_prompt_that_fits_is_one_message_with_everything() -> None:
    [message] = prompt_messages(REQUEST, approval_id="ap_1", guest=False, buttons=True, fits=lambda _: True)
    assert command_shown([message]) == visible(COMMAND)
    assert "\u202e" not in message and "<U+202E>" in message
    assert "allowlist \\(tools\\.exec\\.allowlist\\)" in message and message.endswith("No answer means no.")


def test_a_long_command_is_split_into_parts_that_join_exactly_and_the_last_has_room() -> None:
    assert len(COMMAND) > 6000
    messages = prompt_messages(REQUEST, approval_id="ap_1", guest=False, buttons=False, fits=fits_under(2000))
    assert len(messages) >= 5
    assert all(len(m) <= 2000 for m in messages) and len(messages[-1]) + 2 + OUTCOME_ROOM <= 2000
    assert command_shown(messages) == visible(COMMAND)  # nothing cut, nothing added
    count = len(re.findall(r"part \d+ of (\d+); the parts join", "\n".join(messages)))
    assert count == int(re.search(r"of (\d+);", messages[0]).group(1))  # type: ignore[union-attr]
    assert messages[0].startswith("🔐 **Approval needed**") and all(m.startswith("🔐") for m in messages)
    assert "Answer `/approve ap_1` or `/deny ap_1`." in messages[-1] and "Why:" in "\n".join(messages)


def test_a_long_reason_is_split_too_and_shown_whole() -> None:
    reason = "because " * 700
    request = {**REQUEST, "summary": "exec ls", "reason": reason}
    messages = prompt_messages(request, approval_id="ap_2", guest=True, buttons=True, fits=fits_under(1500))
    assert all(len(m) <= 1500 for m in messages)
    assert "".join(re.findall(r"Why(?: \(part \d+ of \d+\))?: (.*)", "\n".join(messages))) == reason
    assert "(not an owner)" in messages[0]


def test_cut_keeps_every_character_and_never_tears_an_escape() -> None:
    text = visible(COMMAND)
    for size in (50, 97, 400):
        parts = cut(text, size)
        assert "".join(parts) == text and all(len(p) <= size for p in parts)
        assert all(not re.search(r"<U\+[0-9A-F]*$", p) for p in parts[:-1])
        assert all(not p[0].isspace() and not p[-1].isspace() for p in parts[1:-1])
