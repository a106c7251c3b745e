"""Approval prompts on any channel: a risky tool call shown to an owner, answered by an owner only.

The ApprovalBroker emits `approval_request`; the prompt goes where an owner sees it: the chat the
run belongs to when an owner asked, otherwise the owners' private chats (a guest's request must
reach the owner, and the guest gets nothing to press). With buttons (capabilities.buttons) the
adapter shows Approve / Deny and reports a press through kit.approval_answer(); without, the prompt
says to answer `/approve ID` or `/deny ID`, which the kit reads as commands. Either way only an
owner (access.may_approve) resolves the broker's request; the broker's `approval_result` (approved,
denied, or timeout = denied) then edits every prompt to show the outcome (or, on a platform that
cannot edit, posts it).

The prompt shows the whole command and the whole reason, each character as it is (agent/core/visible.py:
an override or an invisible character is written `<U+XXXX>`); what does not fit one message is split into
numbered parts over several messages, the buttons on the last, never cut (prompt_messages).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

from clawgate.agent.core.redact import redact

from clawgate.agent.core.visible import visible

from .markdown import escape, fence

log = logging.getLogger("clawgate.channels")
OUTCOME_ROOM = 240  # the last message leaves this room: a platform's hint under the buttons, then the outcome
MIN_PART = 40  # a part smaller than this means the platform's message cannot hold even the frame
OUTCOMES = {"approved": "✅ Approved — running it.", "denied": "❌ Denied — not run.",
            "timeout": "⌛ No answer in time — not run.", "stopped": "⏹ The run stopped — not run."}
ONLY_OWNERS = "Only the owner of this agent can answer this."
NOT_PENDING = "This request is no longer pending."
REMOTE_KEPT = 1000  # other processes' pending requests remembered (a fleet); each is answered or times out


class PromptOps(Protocol):
    """The adapter's sends as the prompts use them (failures logged by the implementation, never raised)."""

    async def post(self, chat_id: str, text: str, thread_id: str | None) -> str | None: ...
    async def ask(self, chat_id: str, thread_id: str | None, approval_id: str, markdown: str) -> str | None: ...
    async def replace(self, chat_id: str, message_id: str, markdown: str) -> bool: ...
    def fits(self, markdown: str) -> bool: ...


@dataclass
class _Prompt:
    chat_id: str
    text: str  # the Markdown of the prompt's last message (the one with the buttons, edited at the outcome)
    message_id: asyncio.Future[str | None]


class ApprovalPrompts:
    def __init__(self, ops: PromptOps, *, channel: str, resolve: Callable[[str, bool], bool],
                 owner_chats: Callable[[str], list[str]], locate: Callable[[str], tuple[str, str | None] | None],
                 buttons: bool, edit: bool) -> None:
        self.ops = ops
        self.channel = channel
        self._resolve = resolve
        self._owner_chats = owner_chats
        self._locate = locate
        self.buttons = buttons
        self.edit = edit
        self._prompts: dict[str, list[_Prompt]] = {}
        self._sessions: dict[str, str] = {}  # approval id -> the session whose run asked (its agent's owners answer)
        self._remote: dict[str, None] = {}  # requests of runs on other processes of a fleet, oldest first
        self._tasks: set[asyncio.Task[Any]] = set()

    def pending_in(self, approval_id: str, chat_id: str | None) -> bool:
        """A prompt for `approval_id` is showing (in `chat_id`, when given)."""
        return any(chat_id is None or p.chat_id == chat_id for p in self._prompts.get(approval_id, ()))

    def on_event(self, event: dict[str, Any]) -> None:
        """Event hub subscriber: show this channel's runs' requests to an owner, and the outcomes of ones shown."""
        if event["type"] == "approval_request":
            request = event.get("request") or {}
            if request.get("channel") == self.channel and request.get("id"):
                self._sessions[str(request["id"])] = str(request.get("session_key") or "")
                self._show(str(request["id"]), request)
        elif event["type"] == "approval_result" and event.get("id") in self._prompts:
            self._sessions.pop(str(event["id"]), None)
            how = event.get("how") or ("approved" if event.get("approved") else "denied")
            self._spawn(self._settle(str(event["id"]), str(how)))

    def on_remote_event(self, event: dict[str, Any]) -> None:
        """A run on another process of a fleet asked (its prompt went out through this process's connection,
        where the answer arrives): remember where it shows, so a press or `/approve` here is taken; forget
        it at its outcome (that process edits its own prompts)."""
        if event.get("type") == "approval_request":
            request = event.get("request") or {}
            approval_id = str(request.get("id") or "")
            if request.get("channel") == self.channel and approval_id and approval_id not in self._prompts:
                self._sessions[approval_id] = str(request.get("session_key") or "")
                loop = asyncio.get_running_loop()
                shown = [_Prompt(chat, "", loop.create_future()) for chat, _ in self._targets(request)]
                for prompt in shown:
                    prompt.message_id.set_result(None)  # nothing to edit here
                self._prompts[approval_id] = shown
                self._remote[approval_id] = None
                if len(self._remote) > REMOTE_KEPT:  # a result never relayed (its process died): forget the oldest
                    oldest = next(iter(self._remote))
                    del self._remote[oldest]
                    self._prompts.pop(oldest, None)

        elif event.get("type") == "approval_result" and str(event.get("id")) in self._remote:
            del self._remote[str(event.get("id"))]
            self._sessions.pop(str(event.get("id")), None)
            self._prompts.pop(str(event.get("id")), None)

    def session_of(self, approval_id: str) -> str | None:
        """The session whose run asked for a request shown here (None: not one of ours)."""
        return self._sessions.get(approval_id)

    def answer(self, approval_id: str, *, owner: bool, approved: bool, chat_id: str | None = None) -> str:
        """A press or an `/approve ID`: the line to show whoever answered."""
        if not self.pending_in(approval_id, chat_id):
            return NOT_PENDING
        if not owner:
            log.warning("%s: a non-owner tried to answer approval %s", self.channel, approval_id)
            return ONLY_OWNERS
        if self._resolve(approval_id, approved):
            return "Approved." if approved else "Denied."
        return NOT_PENDING

    def _targets(self, request: dict[str, Any]) -> list[tuple[str, str | None]]:
        """(chat, thread) where a request is shown: the run's chat when an owner asked, else the private chats of
        the owners of the run's agent."""
        run_chat, session_key = str(request.get("chat_id")), str(request.get("session_key") or "")
        if request.get("owner"):
            where = self._locate(session_key)
            return [(run_chat, where[1] if where and where[0] == run_chat else None)]
        return [(chat, None) for chat in self._owner_chats(session_key)]

    def _show(self, approval_id: str, request: dict[str, Any]) -> None:
        run_chat = str(request.get("chat_id"))
        targets = self._targets(request)
        if not targets:  # a guest's request, and no owner chat known
            log.warning("approval %s from a guest in %s chat %s: no owner chat to ask (channels.%s.owner); "
                        "answer it through the gateway or it times out as denied", approval_id, self.channel,
                        run_chat, self.channel)
            return
        messages = prompt_messages(request, approval_id=approval_id, guest=not request.get("owner"),
                                   buttons=self.buttons, fits=self.ops.fits)
        loop = asyncio.get_running_loop()
        prompts = self._prompts[approval_id] = [_Prompt(chat, messages[-1], loop.create_future())
                                                for chat, _ in targets]
        for prompt, (_, thread) in zip(prompts, targets):
            self._spawn(self._ask(approval_id, prompt, thread, messages[:-1]))

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _ask(self, approval_id: str, prompt: _Prompt, thread_id: str | None, before: list[str]) -> None:
        """The prompt's messages in order, the buttons on the last; a part that could not be sent stops it
        (an owner never gets buttons under a command shown in part: the request times out as denied)."""
        message_id = None
        try:
            for text in before:
                if await self.ops.post(prompt.chat_id, text, thread_id) is None:
                    log.warning("%s: approval %s not shown in chat %s: a part of it could not be sent",
                                self.channel, approval_id, prompt.chat_id)
                    return
            if self.buttons:
                message_id = await self.ops.ask(prompt.chat_id, thread_id, approval_id, prompt.text)
            else:
                message_id = await self.ops.post(prompt.chat_id, prompt.text, thread_id)
        finally:
            prompt.message_id.set_result(message_id)

    async def _settle(self, approval_id: str, how: str) -> None:
        outcome = OUTCOMES.get(how, escape(how))
        for prompt in self._prompts.pop(approval_id, []):
            message_id = await prompt.message_id
            if message_id is None:
                continue
            if self.edit:
                await self.ops.replace(prompt.chat_id, message_id, f"{prompt.text}\n\n{outcome}")
            else:
                await self.ops.post(prompt.chat_id, f"{outcome} (approval {approval_id})", None)

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def prompt_messages(request: dict[str, Any], *, approval_id: str, guest: bool, buttons: bool,
                    fits: Callable[[str], bool]) -> list[str]:
    """The prompt as Markdown messages, each one message on the platform (`fits`), the last with room for
    the buttons' hint and the outcome: the whole command and the whole reason, shown as they are
    (visible()), never cut. What does not fit one message is split into numbered parts that join
    without a break; everything the model wrote is escaped or fenced (no links or formatting of its own)."""
    command = visible(redact(str(request.get("summary") or request.get("tool") or "a tool call")))
    reason = visible(str(request.get("reason") or "(none given)"))
    who = (f"\nAsked in chat {escape(visible(str(request.get('chat_id'))))} by user "
           f"{escape(visible(str(request.get('sender_id') or '?')))} (not an owner)") if guest else ""
    head = f"🔐 **Approval needed**{who}"
    footer = "No answer means no." + ("" if buttons else
                                      f"\n\nAnswer `/approve {approval_id}` or `/deny {approval_id}`.")
    last_fits = lambda text: fits(f"{text}\n\n{'x' * OUTCOME_ROOM}")  # noqa: E731
    whole = f"{head}\n{fence(command)}\nWhy: {escape(reason)}\n{footer}"
    if last_fits(whole):
        return [whole]
    more = f"🔐 Approval {approval_id}, continued"
    units = [head,
             *_parts(command, lambda k, n, part: (f"The command (part {k} of {n}; the parts join without a break):"
                                                  if n > 1 else "The command:") + f"\n{fence(part)}",
                     lambda unit: fits(f"{more}\n{unit}")),
             *_parts(reason, lambda k, n, part: f"Why{f' (part {k} of {n})' if n > 1 else ''}: {escape(part)}",
                     lambda unit: fits(f"{more}\n{unit}")),
             footer]
    messages: list[str] = []
    current = ""
    for unit in units:
        joined = f"{current}\n{unit}" if current else unit
        if not current or fits(joined):
            current = joined
        else:
            messages.append(current)
            current = f"{more}\n{unit}"
    if not last_fits(current) and "\n" in current:  # the footer alone, so the last message has room
        messages.append(current.rsplit("\n", 1)[0])
        current = f"{more}\n{footer}"
    return [*messages, current]


def _parts(text: str, label: Callable[[int, int, str], str], fits: Callable[[str], bool]) -> list[str]:
    """`text` as labelled units that each fit one message: whole if it can, else the largest equal-sized
    parts (cut between two non-space characters where possible) whose every unit fits."""
    if fits(label(1, 1, text)):
        return [label(1, 1, text)]
    size = max(1, len(text) // 2)
    while True:
        parts = shown_edges(cut(text, size))
        units = [label(k, len(parts), part) for k, part in enumerate(parts, 1)]
        if size <= MIN_PART or all(fits(u) for u in units):
            return units
        size = max(MIN_PART, size * 3 // 4)


def cut(text: str, size: int) -> list[str]:
    """Consecutive slices of at most `size` characters whose concatenation is `text`; a cut falls between
    two non-space characters, outside a `<U+XXXX>` escape, when one is in the slice's second half (no part
    starts or ends blank, no escape is torn in two)."""
    parts: list[str] = []
    start = 0
    while len(text) - start > size:
        end, outside = start + size, None
        for at in range(end, start + size // 2, -1):
            opened = text.rfind("<U+", max(start, at - 10), at)
            if opened != -1 and ">" not in text[opened:at]:
                continue
            outside = outside or at  # the latest cut that tears no escape, in case none is between non-spaces
            if not text[at - 1].isspace() and not text[at].isspace():
                end = at
                break
        else:
            end = outside or end
        parts.append(text[start:end])
        start = end
    parts.append(text[start:])
    return parts


def shown_edges(parts: list[str]) -> list[str]:
    """Parts whose blank edge at a cut is written `<U+XXXX>`: a space or line break that ends one message's
    code block or starts the next one's shows as nothing, and the command read would not be the one run."""
    shown = list(parts)
    for k in range(len(shown) - 1):
        if shown[k] and shown[k][-1].isspace():
            shown[k] = f"{shown[k][:-1]}<U+{ord(shown[k][-1]):04X}>"
        if shown[k + 1] and shown[k + 1][0].isspace():
            shown[k + 1] = f"<U+{ord(shown[k + 1][0]):04X}>{shown[k + 1][1:]}"
    return shown


__all__ = ["ApprovalPrompts", "OUTCOMES", "cut", "prompt_messages", "shown_edges"]
