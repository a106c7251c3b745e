"""Approval prompts on Telegram: a risky tool call shown with inline Approve / Deny buttons.

The ApprovalBroker emits `approval_request`; this sends the prompt where an owner sees it: the
chat the run belongs to when an owner asked, otherwise the owners' private chats (a guest's
request must reach the owner, and the guest gets no buttons to press). A button press from an
owner (access.may_approve) resolves the broker's request; the broker's `approval_result`
(approved, denied, or timeout = denied) then edits every prompt to show the outcome.
"""

from __future__ import annotations

import asyncio
import html
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from telegram import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup

from clawgate.agent.core.redact import redact

from .access import parse_session_key
from .progress import ChatOps

log = logging.getLogger("clawgate.telegram")
PREFIX = "ap:"
SUMMARY_CAP = 2500  # a Telegram message holds 4096 characters; the prompt's frame and reason fit beside it
REASON_CAP = 500
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
                 answer: Callable[[CallbackQuery, str], Awaitable[None]], owner_chats: list[str] | None = None) -> None:
        self.ops = ops
        self._resolve = resolve
        self._may_approve = may_approve
        self._answer = answer
        self._owner_chats = list(owner_chats or [])
        self._prompts: dict[str, list[_Prompt]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def set_owner_chats(self, chats: list[str]) -> None:
        """An owner named by username was bound to their id: their private chat gets guests' requests too."""
        self._owner_chats = list(chats)

    def on_event(self, event: dict[str, Any]) -> None:
        """Event hub subscriber: show requests of Telegram runs to an owner, show outcomes of ones we showed."""
        if event["type"] == "approval_request":
            request = event.get("request") or {}
            if request.get("channel") == "telegram" and request.get("id"):
                self._show(str(request["id"]), request)
        elif event["type"] == "approval_result" and event.get("id") in self._prompts:
            how = event.get("how") or ("approved" if event.get("approved") else "denied")
            self._spawn(self._settle(str(event["id"]), str(how)))

    def _show(self, approval_id: str, request: dict[str, Any]) -> None:
        run_chat, session_key = str(request.get("chat_id")), str(request.get("session_key") or "")
        if request.get("owner"):
            targets = [(run_chat, session_key)]
        else:
            targets = [(chat, "") for chat in self._owner_chats]
            if not targets:
                log.warning("approval %s from a guest in chat %s: no owner chat to ask (channels.telegram.owner); "
                            "answer it through the gateway or it times out as denied", approval_id, run_chat)
                return
        text = _prompt_text(request, guest=not request.get("owner"))
        loop = asyncio.get_running_loop()
        prompts = self._prompts[approval_id] = [_Prompt(chat, text, loop.create_future()) for chat, _ in targets]
        for prompt, (_, key) in zip(prompts, targets):
            self._spawn(self._ask(approval_id, prompt, key))

    async def on_callback(self, query: CallbackQuery) -> None:
        """A button press. Only answers the query; the message is edited when the broker reports the result."""
        data = query.data or ""
        if not data.startswith(PREFIX) or data.count(":") != 2:
            await self._answer(query, "This button is no longer used.")
            return
        approval_id, choice = data[len(PREFIX):].rsplit(":", 1)
        chat_id = str(query.message.chat.id) if query.message else ""
        if not any(p.chat_id == chat_id for p in self._prompts.get(approval_id, ())):
            await self._answer(query, "This request is no longer pending.")
            return
        if not self._may_approve(query):
            log.warning("user %s pressed an approval button they may not use", query.from_user.id)
            await self._answer(query, "Only the owner of this agent can answer this.")
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
        for prompt in self._prompts.pop(approval_id, []):
            message_id = await prompt.message_id
            if message_id is not None:
                await self.ops.edit(prompt.chat_id, message_id,
                                    f"{prompt.text}\n\n{OUTCOMES.get(how, html.escape(how))}", html=True)

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _prompt_text(request: dict[str, Any], *, guest: bool = False) -> str:
    """Cut first, escape after: an escaped text cut in the middle of an entity is rejected by Telegram
    (and the request would silently time out as denied). Whatever is left out is said to be."""
    summary = _cut(redact(str(request.get("summary") or request.get("tool") or "a tool call")), SUMMARY_CAP)
    reason = _cut(str(request.get("reason") or ""), REASON_CAP)
    who = (f"\nAsked in chat {html.escape(str(request.get('chat_id')))} by user "
           f"{html.escape(str(request.get('sender_id') or '?'))} (not an owner)") if guest else ""
    return (f"🔐 <b>Approval needed</b>{who}\n<pre>{html.escape(summary)}</pre>\nWhy: {html.escape(reason)}\n"
            "No answer means no.")


def _cut(text: str, cap: int) -> str:
    if len(text) <= cap:
        return text
    return text[:cap] + f" […{len(text) - cap} more characters not shown — deny if unsure]"
