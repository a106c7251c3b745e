"""Approval prompts on Telegram: a risky tool call shown with inline Approve / Deny buttons.

The ApprovalBroker emits `approval_request`; this sends the prompt to the chat the run belongs
to. A button press from someone allowed to approve resolves the broker's request; the broker's
`approval_result` (approved, denied, or timeout = denied) then edits the prompt to show the
outcome and removes the buttons. Who may press is decided by access.may_approve.
"""

from __future__ import annotations

import asyncio
import html
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from telegram import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup

from agent.redact import redact

from .access import parse_session_key
from .progress import ChatOps

log = logging.getLogger("clawgate.telegram")
PREFIX = "ap:"
OUTCOMES = {"approved": "✅ Approved — running it.", "denied": "❌ Denied — not run.",
            "timeout": "⌛ No answer in time — not run."}


@dataclass
class _Prompt:
    chat_id: str
    text: str
    message_id: asyncio.Future[int | None]


class ApprovalPrompts:
    def __init__(self, ops: ChatOps, *, resolve: Callable[[str, bool], bool],
                 may_approve: Callable[[CallbackQuery], bool],
                 answer: Callable[[CallbackQuery, str], Awaitable[None]]) -> None:
        self.ops = ops
        self._resolve = resolve
        self._may_approve = may_approve
        self._answer = answer
        self._prompts: dict[str, _Prompt] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def on_event(self, event: dict[str, Any]) -> None:
        """Event hub subscriber: show requests for Telegram chats, show outcomes of ones we showed."""
        if event["type"] == "approval_request":
            request = event.get("request") or {}
            if request.get("channel") == "telegram" and request.get("id"):
                prompt = _Prompt(str(request.get("chat_id")), _prompt_text(request),
                                 asyncio.get_running_loop().create_future())
                self._prompts[str(request["id"])] = prompt
                self._spawn(self._ask(str(request["id"]), prompt, str(request.get("session_key") or "")))
        elif event["type"] == "approval_result" and event.get("id") in self._prompts:
            how = event.get("how") or ("approved" if event.get("approved") else "denied")
            self._spawn(self._settle(str(event["id"]), str(how)))

    async def on_callback(self, query: CallbackQuery) -> None:
        """A button press. Only answers the query; the message is edited when the broker reports the result."""
        data = query.data or ""
        if not data.startswith(PREFIX) or data.count(":") != 2:
            await self._answer(query, "This button is no longer used.")
            return
        approval_id, choice = data[len(PREFIX):].rsplit(":", 1)
        prompt = self._prompts.get(approval_id)
        chat_id = str(query.message.chat.id) if query.message else ""
        if prompt is None or prompt.chat_id != chat_id:
            await self._answer(query, "This request is no longer pending.")
            return
        if not self._may_approve(query):
            log.warning("user %s pressed an approval button they may not use", query.from_user.id)
            await self._answer(query, "Only the person this agent works for can answer this.")
            return
        approved = choice == "y"
        if self._resolve(approval_id, approved):
            await self._answer(query, "Approved." if approved else "Denied.")
        else:
            await self._answer(query, "This request is no longer pending.")

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _ask(self, approval_id: str, prompt: _Prompt, session_key: str) -> None:
        where = parse_session_key(session_key)
        markup = InlineKeyboardMarkup([[InlineKeyboardButton("✅ Approve", callback_data=f"{PREFIX}{approval_id}:y"),
                                        InlineKeyboardButton("❌ Deny", callback_data=f"{PREFIX}{approval_id}:n")]])
        message_id = None
        try:
            message_id = await self.ops.post(prompt.chat_id, prompt.text, where[1] if where else None,
                                             markup=markup, html=True)
        finally:
            prompt.message_id.set_result(message_id)

    async def _settle(self, approval_id: str, how: str) -> None:
        prompt = self._prompts.pop(approval_id)
        message_id = await prompt.message_id
        if message_id is not None:
            await self.ops.edit(prompt.chat_id, message_id, f"{prompt.text}\n\n{OUTCOMES.get(how, html.escape(how))}",
                                html=True)

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _prompt_text(request: dict[str, Any]) -> str:
    summary = html.escape(redact(str(request.get("summary") or request.get("tool") or "a tool call")))[:900]
    reason = html.escape(str(request.get("reason") or ""))[:300]
    return f"🔐 <b>Approval needed</b>\n<code>{summary}</code>\nWhy: {reason}\nNo answer means no."
