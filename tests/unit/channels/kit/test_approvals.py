"""Approval prompts show the whole command and reason, as they are, in as many messages as the platform needs."""

from __future__ import annotations

import re

from clawgate.agent.core.visible import visible
from clawgate.channels.kit.approvals import OUTCOME_ROOM, ApprovalPrompts, cut, prompt_messages, shown_edges
from tests.waiting import wait_until_async

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


def test_a_blank_at_a_cut_is_shown_never_lost_between_two_messages() -> None:
    """Padding with no two adjacent non-spaces leaves no clean cut: the space a cut falls on would end one
    code block or start the next, where it shows as nothing; it is written <U+0020> instead."""
    text = "rm -rf /tmp/x" + " /" * 400
    parts = cut(text, 97)
    assert "".join(parts) == text and any(p[-1].isspace() or p[0].isspace() for p in parts)
    shown = shown_edges(parts)
    assert all(not p[0].isspace() and not p[-1].isspace() for p in shown)
    assert "".join(shown).replace("<U+0020>", " ") == text  # only the edges changed, each to its visible form
    messages = prompt_messages({**REQUEST, "summary": text}, approval_id="ap_3", guest=False, buttons=True,
                               fits=fits_under(300))
    blocks = [match.group(2) for message in messages for match in FENCED.finditer(message)]
    assert len(blocks) > 1 and all(not b[0].isspace() and not b[-1].isspace() for b in blocks)


class Ops:
    """The adapter's sends as the prompts use them, on a platform whose messages hold 1,500 characters."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.fail_at = fail_at

    async def post(self, chat_id: str, text: str, thread_id: str | None) -> str | None:
        self.calls.append(("post", text))
        return None if len(self.calls) == self.fail_at else str(len(self.calls))

    async def ask(self, chat_id: str, thread_id: str | None, approval_id: str, markdown: str) -> str | None:
        self.calls.append(("ask", markdown))
        return str(len(self.calls))

    async def replace(self, chat_id: str, message_id: str, markdown: str) -> bool:
        self.calls.append((f"replace {message_id}", markdown))
        return True

    def fits(self, markdown: str) -> bool:
        return len(markdown) <= 1500


def prompts(ops: Ops) -> ApprovalPrompts:
    return ApprovalPrompts(ops, channel="memory", resolve=lambda approval_id, yes: True, owner_chats=lambda session: [],
                           locate=lambda key: ("c1", None), buttons=True, edit=True)


async def test_the_parts_go_out_in_order_the_buttons_last_and_the_outcome_edits_the_last() -> None:
    ops = Ops()
    shown = prompts(ops)
    shown.on_event({"type": "approval_request", "request": {**REQUEST, "id": "ap_9", "channel": "memory",
                                                            "chat_id": "c1", "owner": True}})
    await wait_until_async(lambda: any(kind == "ask" for kind, _ in ops.calls), "the buttons")
    kinds = [kind for kind, _ in ops.calls]
    assert len(kinds) > 2 and kinds == ["post"] * (len(kinds) - 1) + ["ask"]
    assert command_shown([text for _, text in ops.calls]) == visible(COMMAND)
    shown.on_event({"type": "approval_result", "id": "ap_9", "approved": False, "how": "denied"})
    await wait_until_async(lambda: ops.calls[-1][0].startswith("replace"), "the outcome")
    assert ops.calls[-1] == (f"replace {len(kinds)}", f"{ops.calls[len(kinds) - 1][1]}\n\n❌ Denied — not run.")
    await shown.close()


async def test_no_buttons_under_a_command_whose_part_could_not_be_sent() -> None:
    ops = Ops(fail_at=2)
    shown = prompts(ops)
    shown.on_event({"type": "approval_request", "request": {**REQUEST, "id": "ap_8", "channel": "memory",
                                                            "chat_id": "c1", "owner": True}})
    [prompt] = shown._prompts["ap_8"]
    await wait_until_async(prompt.message_id.done, "the prompt given up")  # its sender finished
    assert prompt.message_id.result() is None
    assert [kind for kind, _ in ops.calls] == ["post", "post"]  # stopped at the failed part: nothing to press
    await shown.close()
