"""A fake Telegram Bot API server for tests.

Why: the daemon must be exercised with the *real* python-telegram-bot client (its request
encoding, retry and polling logic are part of what we test), but without the network. This
module serves the Bot API over real HTTP on 127.0.0.1, so the daemon can run as a subprocess
and simply be configured with ``base_url=fake.base_url``.

Standard library only. All state is guarded by one lock/condition because the HTTP server
answers from many threads while the test thread injects and inspects.
"""

from __future__ import annotations

import asyncio
import copy
import email.parser
import email.policy
import http.server
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

__all__ = ["FakeTelegram", "html_to_plain_length", "MAX_MESSAGE_LENGTH"]

MAX_MESSAGE_LENGTH = 4096
MAX_CALLBACK_DATA_BYTES = 64

JSONDict = dict[str, Any]

# Parameters whose value is always a string in the Bot API; everything else arriving as a
# form field is JSON-decoded (PTB JSON-encodes every non-str value, see RequestParameter).
_STRING_FIELDS = frozenset(
    {
        "text",
        "caption",
        "parse_mode",
        "data",
        "callback_query_id",
        "url",
        "action",
        "language_code",
        "inline_message_id",
        "secret_token",
        "ip_address",
        "description",
        "short_description",
        "name",
        "emoji",
        "business_connection_id",
        "message_effect_id",
        "certificate",
    }
)

_HTML_TAGS = frozenset(
    {
        "a",
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "code",
        "pre",
        "span",
        "tg-spoiler",
        "blockquote",
        "tg-emoji",
    }
)

_NAMED_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}

_INLINE_BUTTON_ACTIONS = frozenset(
    {
        "url",
        "callback_data",
        "web_app",
        "login_url",
        "switch_inline_query",
        "switch_inline_query_current_chat",
        "switch_inline_query_chosen_chat",
        "copy_text",
        "callback_game",
        "pay",
    }
)

_CHAT_ACTIONS = frozenset(
    {
        "typing",
        "upload_photo",
        "record_video",
        "upload_video",
        "record_voice",
        "upload_voice",
        "upload_document",
        "choose_sticker",
        "find_location",
        "record_video_note",
        "upload_video_note",
    }
)

_DEFAULT_DESCRIPTIONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    404: "Not Found",
    409: "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


# --------------------------------------------------------------------------------------------
# errors and HTML parsing
# --------------------------------------------------------------------------------------------


class _ApiError(Exception):
    """An error response of the Bot API; raised inside method handlers."""

    def __init__(self, status: int, description: str, parameters: JSONDict | None = None):
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters


class HtmlParseError(ValueError):
    """Raised for HTML that Telegram would refuse with "can't parse entities"."""


def _byte_offset(text: str, index: int) -> int:
    """Telegram reports parse errors as UTF-8 byte offsets, so convert a str index."""
    return len(text[:index].encode("utf-8"))


def _decode_entity(text: str, pos: int) -> tuple[str | None, int]:
    """Decode an HTML entity at ``text[pos] == '&'`` like tdlib does.

    Returns (character, next position) or (None, pos) if this is not an entity.
    """
    n = len(text)
    end = pos + 1
    if end < n and text[end] == "#":
        end += 1
        value = 0
        digits = 0
        if end < n and text[end] in "xX":
            end += 1
            while end < n and text[end] in "0123456789abcdefABCDEF":
                value = value * 16 + int(text[end], 16)
                end += 1
                digits += 1
        else:
            while end < n and text[end].isdigit() and text[end].isascii():
                value = value * 10 + int(text[end])
                end += 1
                digits += 1
        if digits == 0 or value == 0 or value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
            return None, pos
        char = chr(value)
    else:
        while end < n and text[end].isascii() and text[end].isalpha():
            end += 1
        name = text[pos + 1 : end]
        if name not in _NAMED_ENTITIES:
            return None, pos
        char = _NAMED_ENTITIES[name]
    if end < n and text[end] == ";":
        end += 1
    return char, end


def _parse_html(text: str, *, strict_ampersand: bool = True) -> str:
    """Validate Telegram-flavoured HTML and return the plain text it renders to.

    Mirrors tdlib's ``parse_html`` (error wording included) so the daemon sees the same
    failures it would get from Telegram. Raises HtmlParseError with the text that follows
    "Bad Request: can't parse entities: ".
    """
    out: list[str] = []
    stack: list[str] = []
    n = len(text)
    i = 0
    while i < n:
        c = text[i]
        if c == "&":
            char, nxt = _decode_entity(text, i)
            if char is None:
                if strict_ampersand:
                    raise HtmlParseError(
                        f'Unescaped "&" at byte offset {_byte_offset(text, i)}; '
                        'it must be written as "&amp;"'
                    )
                out.append("&")
                i += 1
            else:
                out.append(char)
                i = nxt
            continue
        if c != "<":
            out.append(c)
            i += 1
            continue

        begin = i
        begin_byte = _byte_offset(text, begin)
        i += 1
        if i >= n or text[i] != "/":
            # start tag
            while i < n and not text[i].isspace() and text[i] != ">":
                i += 1
            if i >= n:
                raise HtmlParseError(f"Unclosed start tag at byte offset {begin_byte}")
            tag = text[begin + 1 : i].lower()
            if tag not in _HTML_TAGS:
                raise HtmlParseError(
                    f'Unsupported start tag "{tag}" at byte offset {begin_byte}'
                )
            attrs: dict[str, str] = {}
            while i < n and text[i] != ">":
                while i < n and text[i].isspace():
                    i += 1
                if i >= n:
                    break
                if text[i] == ">":
                    break
                name_begin = i
                while i < n and not text[i].isspace() and text[i] not in "=>":
                    i += 1
                attr_name = text[name_begin:i].lower()
                if not attr_name:
                    raise HtmlParseError(
                        f'Empty attribute name in the tag "{tag}" at byte offset {begin_byte}'
                    )
                while i < n and text[i].isspace():
                    i += 1
                if i >= n or text[i] != "=":
                    if tag == "blockquote" and attr_name == "expandable":
                        attrs[attr_name] = ""
                        continue
                    raise HtmlParseError(
                        "Expected equal sign in declaration of an attribute of the tag "
                        f'"{tag}" at byte offset {begin_byte}'
                    )
                i += 1
                while i < n and text[i].isspace():
                    i += 1
                if i >= n:
                    raise HtmlParseError(f"Unclosed start tag at byte offset {begin_byte}")
                if text[i] not in "'\"":
                    token_begin = i
                    while i < n and (text[i].isalnum() or text[i] in ".-"):
                        i += 1
                    value = text[token_begin:i].lower()
                    if i < n and not text[i].isspace() and text[i] != ">":
                        raise HtmlParseError(
                            "Unexpected end of name token at byte offset "
                            f"{_byte_offset(text, token_begin)}"
                        )
                else:
                    quote = text[i]
                    i += 1
                    chars: list[str] = []
                    while i < n and text[i] != quote:
                        if text[i] == "&":
                            char, nxt = _decode_entity(text, i)
                            if char is None:
                                chars.append("&")
                                i += 1
                            else:
                                chars.append(char)
                                i = nxt
                        else:
                            chars.append(text[i])
                            i += 1
                    if i < n:
                        i += 1
                    value = "".join(chars)
                if i >= n:
                    raise HtmlParseError(f"Unclosed start tag at byte offset {begin_byte}")
                attrs[attr_name] = value
            if i >= n:
                raise HtmlParseError(f"Unclosed start tag at byte offset {begin_byte}")
            i += 1  # skip '>'
            if tag == "span" and attrs.get("class") != "tg-spoiler":
                raise HtmlParseError(
                    f'Tag "span" must have class "tg-spoiler" at byte offset {begin_byte}'
                )
            if tag == "tg-emoji" and not attrs.get("emoji-id", "").isdigit():
                raise HtmlParseError("Custom emoji entity must contain a valid custom emoji identifier")
            stack.append(tag)
        else:
            # end tag
            if not stack:
                raise HtmlParseError(f"Unexpected end tag at byte offset {begin_byte}")
            i += 1
            name_begin = i
            while i < n and not text[i].isspace() and text[i] != ">":
                i += 1
            end_name = text[name_begin:i].lower()
            while i < n and text[i].isspace():
                i += 1
            if i >= n or text[i] != ">":
                raise HtmlParseError(f"Unclosed end tag at byte offset {begin_byte}")
            i += 1
            expected = stack.pop()
            if end_name and end_name != expected:
                raise HtmlParseError(
                    f'Unmatched end tag at byte offset {begin_byte}, expected "</{expected}>", '
                    f'found "</{end_name}>"'
                )
    if stack:
        raise HtmlParseError(
            f'Can\'t find end tag corresponding to start tag "{stack[-1]}"'
        )
    return "".join(out)


def html_to_plain_length(html: str) -> int:
    """Length Telegram checks against the 4096 limit: tags removed, entities decoded, trimmed.

    Raises HtmlParseError (a ValueError) for HTML Telegram would refuse.
    """
    return len(_parse_html(html).strip())


def _utf16_len(text: str) -> int:
    """Telegram entity offsets/lengths are in UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


# --------------------------------------------------------------------------------------------
# the fake
# --------------------------------------------------------------------------------------------


@dataclass
class _Queued:
    """A pending update; ``protected`` survives one offset confirmation (see redeliver)."""

    update_id: int
    update: JSONDict
    protected: bool = False


@dataclass
class _Failure:
    """One armed fail_next entry."""

    status: int
    retry_after: int | None
    description: str | None
    remaining: int


@dataclass
class _Stored:
    """A message the fake knows about, so edits/replies/callbacks can refer to it."""

    message: JSONDict
    from_bot: bool
    raw_text: str = ""
    parse_mode: str | None = None
    reply_markup: JSONDict | None = None
    extra: JSONDict = field(default_factory=dict)


class FakeTelegram:
    """In-process fake of the Telegram Bot API, reachable over HTTP at ``base_url``."""

    def __init__(
        self,
        token: str = "123456:TEST-TOKEN",
        bot_username: str = "clawgate_test_bot",
        *,
        strict_ampersand: bool = True,
    ) -> None:
        self.token: str = token
        self.bot_username: str = bot_username
        # Real Telegram tolerates a bare "&"; the fake refuses it by default because the Bot
        # API docs require escaping and unescaped text usually means a real escaping bug.
        self.strict_ampersand: bool = strict_ampersand
        self.port: int = 0

        self.sent: list[JSONDict] = []
        self.edits: list[JSONDict] = []
        self.markup_edits: list[JSONDict] = []
        self.deleted: list[JSONDict] = []
        self.actions: list[JSONDict] = []
        self.commands: list[JSONDict] = []
        self.callback_answers: list[JSONDict] = []
        self.calls: list[tuple[str, JSONDict]] = []

        self._cond = threading.Condition(threading.RLock())
        self._queue: list[_Queued] = []
        self._updates: dict[int, JSONDict] = {}
        self._next_update_id = 700_000_001
        self._confirmed_offset = 0
        self._poll_generation = 0
        self._allowed_updates: list[str] | None = None
        self._webhook_url = ""
        self._chats: dict[int | str, JSONDict] = {}
        self._users: dict[int, JSONDict] = {}
        self._messages: dict[int | str, dict[int, _Stored]] = {}
        self._next_message_id: dict[int | str, int] = {}
        self._callback_ids: set[str] = set()
        self._next_callback = 1
        self._failures: dict[str, list[_Failure]] = {}
        self._my_commands: dict[str, list[JSONDict]] = {}
        self._closing = False

        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()

        bot_id = token.split(":", 1)[0]
        self.bot_user: JSONDict = {
            "id": int(bot_id) if bot_id.isdigit() else 123456,
            "is_bot": True,
            "first_name": "Clawgate Test",
            "username": bot_username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }
        self._methods: dict[str, tuple[str, Callable[[JSONDict], Any]]] = {
            name.lower(): (name, handler)
            for name, handler in {
                "getMe": self._m_get_me,
                "getUpdates": self._m_get_updates,
                "deleteWebhook": self._m_delete_webhook,
                "setWebhook": self._m_set_webhook,
                "getWebhookInfo": self._m_get_webhook_info,
                "sendMessage": self._m_send_message,
                "editMessageText": self._m_edit_message_text,
                "editMessageReplyMarkup": self._m_edit_message_reply_markup,
                "deleteMessage": self._m_delete_message,
                "sendChatAction": self._m_send_chat_action,
                "setMyCommands": self._m_set_my_commands,
                "getMyCommands": self._m_get_my_commands,
                "deleteMyCommands": self._m_delete_my_commands,
                "answerCallbackQuery": self._m_answer_callback_query,
            }.items()
        }

    # ---------------------------------------------------------------- lifecycle

    @property
    def base_url(self) -> str:
        """PTB appends the token, then "/<method>"."""
        return f"http://127.0.0.1:{self.port}/bot"

    def start(self) -> FakeTelegram:
        """Bind an ephemeral port on 127.0.0.1 and serve from a daemon thread."""
        if self._server is not None:
            return self
        fake = self

        class Handler(_Handler):
            owner = fake

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        self._closing = False
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="FakeTelegram", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake long polls and drop kept-alive connections."""
        server = self._server
        if server is None:
            return
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        server.shutdown()
        server.server_close()
        with self._cond:
            conns = list(self._connections)
            self._connections.clear()
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeTelegram:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---------------------------------------------------------------- injection

    def _user(self, user_id: int, username: str | None, first_name: str) -> JSONDict:
        user: JSONDict = {
            "id": user_id,
            "is_bot": False,
            "first_name": first_name,
            "username": username or f"user{abs(user_id)}",
            "language_code": "en",
        }
        self._users[user_id] = user
        return user

    def _chat_for(self, chat_id: int | str, chat_type: str, user: JSONDict | None) -> JSONDict:
        if chat_type == "private":
            chat: JSONDict = {"id": chat_id, "type": "private"}
            if user is not None:
                chat["first_name"] = user["first_name"]
                chat["username"] = user["username"]
        else:
            chat = {"id": chat_id, "type": chat_type, "title": f"Test {chat_type} {chat_id}"}
            if chat_type == "supergroup":
                chat["is_forum"] = False
        self._chats[chat_id] = chat
        return chat

    def _known_chat(self, chat_id: int | str) -> JSONDict:
        """The chat object for a chat the bot writes to (made up if never seen)."""
        if chat_id in self._chats:
            return self._chats[chat_id]
        if isinstance(chat_id, int) and chat_id > 0:
            return self._chat_for(chat_id, "private", self._users.get(chat_id) or self._user(chat_id, None, "Test"))
        if isinstance(chat_id, str):
            return {"id": -1000000000000 - abs(hash(chat_id)) % 10**9, "type": "channel", "title": chat_id}
        return self._chat_for(chat_id, "supergroup", None)

    def _new_message_id(self, chat_id: int | str) -> int:
        mid = self._next_message_id.get(chat_id, 1)
        self._next_message_id[chat_id] = mid + 1
        return mid

    def _push_update(self, payload: JSONDict) -> int:
        update_id = self._next_update_id
        self._next_update_id += 1
        update = {"update_id": update_id, **payload}
        self._updates[update_id] = update
        self._queue.append(_Queued(update_id, update))
        self._cond.notify_all()
        return update_id

    def inject_message(
        self,
        chat_id: int,
        text: str,
        *,
        user_id: int | None = None,
        username: str | None = None,
        first_name: str = "Test",
        chat_type: str = "private",
        reply_to_message_id: int | None = None,
        message_thread_id: int | None = None,
        entities: list[JSONDict] | None = None,
    ) -> int:
        """Queue a user's text message; returns its update_id."""
        with self._cond:
            user = self._user(chat_id if user_id is None else user_id, username, first_name)
            chat = self._chat_for(chat_id, chat_type, user)
            message_id = self._new_message_id(chat_id)
            message: JSONDict = {
                "message_id": message_id,
                "from": user,
                "chat": chat,
                "date": int(time.time()),
                "text": text,
            }
            if entities is None:
                entities = self._auto_entities(text, chat_type)
            if entities:
                message["entities"] = entities
            if message_thread_id is not None:
                message["message_thread_id"] = message_thread_id
                if chat_type == "supergroup":
                    message["is_topic_message"] = True
            if reply_to_message_id is not None:
                replied = self._messages.get(chat_id, {}).get(reply_to_message_id)
                message["reply_to_message"] = (
                    copy.deepcopy(replied.message)
                    if replied
                    else {
                        "message_id": reply_to_message_id,
                        "chat": chat,
                        "date": int(time.time()),
                        "from": self.bot_user,
                        "text": "",
                    }
                )
            self._messages.setdefault(chat_id, {})[message_id] = _Stored(
                message=message, from_bot=False, raw_text=text
            )
            return self._push_update({"message": message})

    def _auto_entities(self, text: str, chat_type: str) -> list[JSONDict]:
        """bot_command for a leading "/cmd", mention for "@bot" in groups (as Telegram does)."""
        entities: list[JSONDict] = []
        if text.startswith("/"):
            end = 1
            while end < len(text) and not text[end].isspace():
                end += 1
            if end > 1:
                entities.append({"type": "bot_command", "offset": 0, "length": _utf16_len(text[:end])})
        if chat_type != "private":
            mention = f"@{self.bot_username}"
            lowered = text.lower()
            start = lowered.find(mention.lower())
            while start != -1:
                covered = any(
                    e["offset"] <= _utf16_len(text[:start]) < e["offset"] + e["length"] for e in entities
                )
                if not covered:
                    entities.append(
                        {"type": "mention", "offset": _utf16_len(text[:start]), "length": _utf16_len(mention)}
                    )
                start = lowered.find(mention.lower(), start + len(mention))
        entities.sort(key=lambda e: e["offset"])
        return entities

    def inject_callback(self, chat_id: int, user_id: int, data: str, message_id: int) -> int:
        """Queue an inline-button press on the bot's message ``message_id``; returns update_id."""
        with self._cond:
            user = self._users.get(user_id) or self._user(user_id, None, "Test")
            stored = self._messages.get(chat_id, {}).get(message_id)
            if stored is not None:
                message = copy.deepcopy(stored.message)
            else:
                message = {
                    "message_id": message_id,
                    "from": self.bot_user,
                    "chat": self._known_chat(chat_id),
                    "date": int(time.time()),
                    "text": "",
                }
            query_id = f"{abs(chat_id) % 10**6}{self._next_callback:08d}"
            self._next_callback += 1
            self._callback_ids.add(query_id)
            callback = {
                "id": query_id,
                "from": user,
                "message": message,
                "chat_instance": str(abs(hash((chat_id, self.token))) % 10**18),
                "data": data,
            }
            return self._push_update({"callback_query": callback})

    def redeliver(self, update_id: int) -> None:
        """Queue an already-delivered update again (same update_id).

        Models Telegram resending after it never got the offset confirmation: the copy is
        returned by the next getUpdates even if the bot's offset is already past it.
        """
        with self._cond:
            if update_id not in self._updates:
                raise KeyError(f"unknown update_id {update_id}")
            for entry in self._queue:
                if entry.update_id == update_id:
                    entry.protected = True
                    break
            else:
                self._queue.append(_Queued(update_id, self._updates[update_id], protected=True))
                self._queue.sort(key=lambda e: e.update_id)
            self._cond.notify_all()

    # ---------------------------------------------------------------- observation

    def messages_to(self, chat_id: int) -> list[str]:
        """Texts (as sent, markup included) of accepted sendMessage calls to ``chat_id``."""
        with self._cond:
            return [m["text"] for m in self.sent if m["chat_id"] == chat_id]

    def _describe_calls(self, last: int = 12) -> str:
        with self._cond:
            tail = self.calls[-last:]
        lines = []
        for method, params in tail:
            shown = json.dumps(params, default=str, ensure_ascii=False)
            lines.append(f"  {method} {shown[:300]}")
        return "\n".join(lines) or "  (no calls)"

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        """Block (this thread only) until ``predicate()`` is true; AssertionError on timeout.

        Do not call from the event loop that runs the bot under test - use wait_for_async.
        """
        deadline = time.monotonic() + timeout
        while True:
            if predicate():
                return
            if time.monotonic() >= deadline:
                raise AssertionError(self._timeout_message(predicate, timeout))
            time.sleep(0.02)

    async def wait_for_async(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        """Like wait_for, but yields to the event loop (for in-process bots)."""
        deadline = time.monotonic() + timeout
        while True:
            if predicate():
                return
            if time.monotonic() >= deadline:
                raise AssertionError(self._timeout_message(predicate, timeout))
            await asyncio.sleep(0.02)

    def _timeout_message(self, predicate: Callable[[], bool], timeout: float) -> str:
        name = getattr(predicate, "__qualname__", repr(predicate))
        return (
            f"condition {name} not met within {timeout:.1f}s; "
            f"sent={len(self.sent)} pending_updates={self.pending_updates()} "
            f"confirmed_offset={self.confirmed_offset}\nlast Bot API calls:\n{self._describe_calls()}"
        )

    def wait_sent(self, chat_id: int, n: int = 1, timeout: float = 10.0) -> list[str]:
        """Wait until at least ``n`` messages were sent to ``chat_id``; returns all their texts."""
        self.wait_for(lambda: len(self.messages_to(chat_id)) >= n, timeout)
        return self.messages_to(chat_id)

    async def wait_sent_async(self, chat_id: int, n: int = 1, timeout: float = 10.0) -> list[str]:
        """Async variant of wait_sent."""
        await self.wait_for_async(lambda: len(self.messages_to(chat_id)) >= n, timeout)
        return self.messages_to(chat_id)

    @property
    def confirmed_offset(self) -> int:
        """Highest positive offset the bot has passed to getUpdates."""
        with self._cond:
            return self._confirmed_offset

    def pending_updates(self) -> int:
        """Updates Telegram would still hold (not yet confirmed by an offset)."""
        with self._cond:
            return len(self._queue)

    # ---------------------------------------------------------------- failure injection

    def fail_next(
        self,
        method: str,
        *,
        status: int = 429,
        retry_after: int | None = 1,
        description: str | None = None,
        times: int = 1,
    ) -> None:
        """Make the next ``times`` calls of ``method`` fail with ``status`` (nothing performed)."""
        with self._cond:
            self._failures.setdefault(method.lower(), []).append(
                _Failure(status, retry_after, description, times)
            )

    def _take_failure(self, method: str) -> _ApiError | None:
        queue = self._failures.get(method.lower())
        if not queue:
            return None
        failure = queue[0]
        failure.remaining -= 1
        if failure.remaining <= 0:
            queue.pop(0)
        params: JSONDict | None = None
        if failure.status == 429:
            wait = failure.retry_after
            description = failure.description or f"Too Many Requests: retry after {wait}"
            if wait is not None:
                params = {"retry_after": wait}
        else:
            description = failure.description or _DEFAULT_DESCRIPTIONS.get(
                failure.status, f"Error {failure.status}"
            )
        return _ApiError(failure.status, description, params)

    # ---------------------------------------------------------------- dispatch

    def _dispatch(self, path: str, params: JSONDict) -> tuple[int, JSONDict]:
        """Route one HTTP request; returns (HTTP status, JSON body)."""
        if not path.startswith("/bot") or "/" not in path[4:]:
            return 404, {"ok": False, "error_code": 404, "description": "Not Found"}
        token, _, method = path[4:].partition("/")
        if token != self.token:
            return 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
        entry = self._methods.get(method.lower())
        name = entry[0] if entry else method
        with self._cond:
            self.calls.append((name, copy.deepcopy(params)))
            failure = self._take_failure(name)
        try:
            if failure is not None:
                raise failure
            if entry is None:
                raise _ApiError(404, "Not Found")
            result = entry[1](params)
        except _ApiError as err:
            body: JSONDict = {"ok": False, "error_code": err.status, "description": err.description}
            if err.parameters:
                body["parameters"] = err.parameters
            return err.status, body
        return 200, {"ok": True, "result": result}

    # ---------------------------------------------------------------- parameter helpers

    @staticmethod
    def _int(params: JSONDict, name: str, default: int | None = None) -> int | None:
        value = params.get(name, default)
        if value is None:
            return None
        try:
            return int(value)
        except (TypeError, ValueError):
            raise _ApiError(400, f"Bad Request: invalid {name} specified") from None

    @staticmethod
    def _chat_id(params: JSONDict) -> int | str:
        value = params.get("chat_id")
        if value is None or value == "":
            raise _ApiError(400, "Bad Request: chat_id is empty")
        if isinstance(value, bool):
            raise _ApiError(400, "Bad Request: chat not found")
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            if value.lstrip("-").isdigit():
                return int(value)
            if value.startswith("@"):
                return value
        raise _ApiError(400, "Bad Request: chat not found")

    def _render(self, text: Any, parse_mode: Any) -> str:
        """Check text like sendMessage/editMessageText do; returns the plain text."""
        if not isinstance(text, str) or not text.strip():
            raise _ApiError(400, "Bad Request: message text is empty")
        mode = (parse_mode or "").lower() if isinstance(parse_mode, str) else ""
        if mode == "html":
            try:
                plain = _parse_html(text, strict_ampersand=self.strict_ampersand)
            except HtmlParseError as err:
                raise _ApiError(400, f"Bad Request: can't parse entities: {err}") from None
        elif mode in ("", "markdown", "markdownv2"):
            plain = text  # Markdown validation is deliberately not modelled.
        else:
            raise _ApiError(400, "Bad Request: unsupported parse_mode")
        plain = plain.strip()
        if not plain:
            raise _ApiError(400, "Bad Request: message text is empty")
        if len(plain) > MAX_MESSAGE_LENGTH:
            raise _ApiError(400, "Bad Request: message is too long")
        return plain

    @staticmethod
    def _markup(value: Any) -> JSONDict | None:
        """Validate reply_markup the way Telegram rejects common mistakes."""
        if value is None or value == "":
            return None
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise _ApiError(400, "Bad Request: can't parse reply keyboard markup JSON object") from None
        if not isinstance(value, dict):
            raise _ApiError(400, "Bad Request: can't parse reply keyboard markup JSON object")
        keyboard = value.get("inline_keyboard")
        if keyboard is not None:
            if not isinstance(keyboard, list) or not all(isinstance(row, list) for row in keyboard):
                raise _ApiError(400, "Bad Request: can't parse inline keyboard button: field \"inline_keyboard\" must be an Array of Arrays")
            for row in keyboard:
                for button in row:
                    if not isinstance(button, dict) or not isinstance(button.get("text"), str):
                        raise _ApiError(400, "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard")
                    if not any(key in button for key in _INLINE_BUTTON_ACTIONS):
                        raise _ApiError(400, "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard")
                    data = button.get("callback_data")
                    if data is not None and not (1 <= len(str(data).encode("utf-8")) <= MAX_CALLBACK_DATA_BYTES):
                        raise _ApiError(400, "Bad Request: BUTTON_DATA_INVALID")
        return value

    # ---------------------------------------------------------------- methods

    def _m_get_me(self, params: JSONDict) -> JSONDict:
        return dict(self.bot_user)

    def _m_delete_webhook(self, params: JSONDict) -> bool:
        with self._cond:
            self._webhook_url = ""
            if params.get("drop_pending_updates") in (True, "true", "True", 1):
                self._queue.clear()
        return True

    def _m_set_webhook(self, params: JSONDict) -> bool:
        with self._cond:
            self._webhook_url = str(params.get("url") or "")
            if params.get("drop_pending_updates") in (True, "true", "True", 1):
                self._queue.clear()
        return True

    def _m_get_webhook_info(self, params: JSONDict) -> JSONDict:
        with self._cond:
            return {
                "url": self._webhook_url,
                "has_custom_certificate": False,
                "pending_update_count": len(self._queue),
            }

    def _m_get_updates(self, params: JSONDict) -> list[JSONDict]:
        offset = self._int(params, "offset", 0) or 0
        limit = self._int(params, "limit", 100) or 100
        limit = max(1, min(100, limit))
        timeout = max(0, self._int(params, "timeout", 0) or 0)
        allowed = params.get("allowed_updates")
        with self._cond:
            # A newer getUpdates ends the one still waiting (it gets 409, like Telegram).
            self._poll_generation += 1
            generation = self._poll_generation
            self._cond.notify_all()
            if self._webhook_url:
                raise _ApiError(
                    409,
                    "Conflict: can't use getUpdates method while webhook is active; "
                    "use deleteWebhook to delete the webhook first",
                )
            if isinstance(allowed, list):
                self._allowed_updates = [str(a) for a in allowed] or None
            if offset > 0:
                self._queue = [e for e in self._queue if e.update_id >= offset or e.protected]
                self._confirmed_offset = max(self._confirmed_offset, offset)
            elif offset < 0:
                self._queue = self._queue[offset:]
            deadline = time.monotonic() + timeout
            while True:
                if self._closing:
                    return []
                if generation != self._poll_generation:
                    raise _ApiError(409, _DEFAULT_DESCRIPTIONS[409])
                if self._allowed_updates is not None:
                    self._queue = [e for e in self._queue if self._update_type(e.update) in self._allowed_updates]
                batch = self._queue[:limit]
                remaining = deadline - time.monotonic()
                if batch or remaining <= 0:
                    break
                self._cond.wait(remaining)
            for entry in batch:
                entry.protected = False
            return [copy.deepcopy(e.update) for e in batch]

    @staticmethod
    def _update_type(update: JSONDict) -> str:
        return next((k for k in update if k != "update_id"), "")

    def _reply_target(self, chat_id: int | str, params: JSONDict) -> tuple[int | None, JSONDict | None]:
        """Resolve reply_parameters / reply_to_message_id against known messages."""
        reply_id = self._int(params, "reply_to_message_id")
        allow_missing = params.get("allow_sending_without_reply") in (True, "true")
        rp = params.get("reply_parameters")
        if isinstance(rp, str):
            try:
                rp = json.loads(rp)
            except ValueError:
                raise _ApiError(400, "Bad Request: can't parse reply parameters JSON object") from None
        if isinstance(rp, dict) and rp.get("message_id") is not None:
            reply_id = int(rp["message_id"])
            allow_missing = allow_missing or bool(rp.get("allow_sending_without_reply"))
            if rp.get("chat_id") not in (None, chat_id):
                return reply_id, None  # cross-chat reply: not modelled
        if reply_id is None:
            return None, None
        stored = self._messages.get(chat_id, {}).get(reply_id)
        if stored is None:
            if allow_missing:
                return None, None
            raise _ApiError(400, "Bad Request: message to be replied not found")
        return reply_id, copy.deepcopy(stored.message)

    def _m_send_message(self, params: JSONDict) -> JSONDict:
        with self._cond:
            chat_id = self._chat_id(params)
            text = params.get("text")
            parse_mode = params.get("parse_mode")
            plain = self._render(text, parse_mode)
            markup = self._markup(params.get("reply_markup"))
            thread_id = self._int(params, "message_thread_id")
            reply_id, reply_msg = self._reply_target(chat_id, params)
            message_id = self._new_message_id(chat_id)
            message: JSONDict = {
                "message_id": message_id,
                "from": self.bot_user,
                "chat": self._known_chat(chat_id),
                "date": int(time.time()),
                "text": plain,
            }
            if thread_id is not None:
                message["message_thread_id"] = thread_id
            if reply_msg is not None:
                message["reply_to_message"] = reply_msg
            if markup is not None and "inline_keyboard" in markup:
                message["reply_markup"] = markup
            self._messages.setdefault(chat_id, {})[message_id] = _Stored(
                message=message, from_bot=True, raw_text=str(text), parse_mode=parse_mode, reply_markup=markup
            )
            record = copy.deepcopy(params)
            record.update(
                chat_id=chat_id,
                text=text,
                parse_mode=parse_mode,
                reply_markup=copy.deepcopy(markup),
                message_id=message_id,
                message_thread_id=thread_id,
                reply_to_message_id=reply_id,
                plain_text=plain,
            )
            self.sent.append(record)
            return copy.deepcopy(message)

    def _editable(self, params: JSONDict) -> tuple[int | str, int, _Stored]:
        if params.get("inline_message_id"):
            raise _ApiError(400, "Bad Request: MESSAGE_ID_INVALID")
        chat_id = self._chat_id(params)
        message_id = self._int(params, "message_id")
        if message_id is None:
            raise _ApiError(400, "Bad Request: message identifier is not specified")
        stored = self._messages.get(chat_id, {}).get(message_id)
        if stored is None:
            raise _ApiError(400, "Bad Request: message to edit not found")
        if not stored.from_bot:
            raise _ApiError(400, "Bad Request: message can't be edited")
        return chat_id, message_id, stored

    def _m_edit_message_text(self, params: JSONDict) -> JSONDict:
        with self._cond:
            chat_id, message_id, stored = self._editable(params)
            text = params.get("text")
            parse_mode = params.get("parse_mode")
            plain = self._render(text, parse_mode)
            markup = self._markup(params.get("reply_markup"))
            if text == stored.raw_text and parse_mode == stored.parse_mode and markup == stored.reply_markup:
                raise _ApiError(
                    400,
                    "Bad Request: message is not modified: specified new message content and reply "
                    "markup are exactly the same as a current content and reply markup of the message",
                )
            stored.raw_text = str(text)
            stored.parse_mode = parse_mode
            stored.reply_markup = markup
            stored.message["text"] = plain
            stored.message["edit_date"] = int(time.time())
            if markup is not None and "inline_keyboard" in markup:
                stored.message["reply_markup"] = markup
            else:
                stored.message.pop("reply_markup", None)
            record = copy.deepcopy(params)
            record.update(
                chat_id=chat_id,
                message_id=message_id,
                text=text,
                parse_mode=parse_mode,
                reply_markup=copy.deepcopy(markup),
                plain_text=plain,
            )
            self.edits.append(record)
            return copy.deepcopy(stored.message)

    def _m_edit_message_reply_markup(self, params: JSONDict) -> JSONDict:
        with self._cond:
            chat_id, message_id, stored = self._editable(params)
            markup = self._markup(params.get("reply_markup"))
            if markup == stored.reply_markup:
                raise _ApiError(
                    400,
                    "Bad Request: message is not modified: specified new message content and reply "
                    "markup are exactly the same as a current content and reply markup of the message",
                )
            stored.reply_markup = markup
            if markup is not None and "inline_keyboard" in markup:
                stored.message["reply_markup"] = markup
            else:
                stored.message.pop("reply_markup", None)
            self.markup_edits.append(
                {"chat_id": chat_id, "message_id": message_id, "reply_markup": copy.deepcopy(markup)}
            )
            return copy.deepcopy(stored.message)

    def _m_delete_message(self, params: JSONDict) -> bool:
        with self._cond:
            chat_id = self._chat_id(params)
            message_id = self._int(params, "message_id")
            if message_id is None or self._messages.get(chat_id, {}).pop(message_id, None) is None:
                raise _ApiError(400, "Bad Request: message to delete not found")
            self.deleted.append({"chat_id": chat_id, "message_id": message_id})
            return True

    def _m_send_chat_action(self, params: JSONDict) -> bool:
        with self._cond:
            chat_id = self._chat_id(params)
            action = params.get("action")
            if action not in _CHAT_ACTIONS:
                raise _ApiError(400, "Bad Request: wrong parameter action in request")
            record = copy.deepcopy(params)
            record["chat_id"] = chat_id
            self.actions.append(record)
            return True

    @staticmethod
    def _commands_key(params: JSONDict) -> str:
        scope = params.get("scope") or {"type": "default"}
        if isinstance(scope, str):
            try:
                scope = json.loads(scope)
            except ValueError:
                raise _ApiError(400, "Bad Request: can't parse BotCommandScope JSON object") from None
        return json.dumps([scope, params.get("language_code") or ""], sort_keys=True)

    def _m_set_my_commands(self, params: JSONDict) -> bool:
        commands = params.get("commands")
        if isinstance(commands, str):
            try:
                commands = json.loads(commands)
            except ValueError:
                commands = None
        if not isinstance(commands, list):
            raise _ApiError(400, "Bad Request: can't parse commands JSON object")
        for cmd in commands:
            name = cmd.get("command") if isinstance(cmd, dict) else None
            desc = cmd.get("description") if isinstance(cmd, dict) else None
            if not isinstance(name, str) or not (1 <= len(name) <= 32) or not all(
                ch.islower() or ch.isdigit() or ch == "_" for ch in name
            ):
                raise _ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
            if not isinstance(desc, str) or not (1 <= len(desc) <= 256):
                raise _ApiError(400, "Bad Request: command description is empty")
        with self._cond:
            self._my_commands[self._commands_key(params)] = copy.deepcopy(commands)
            self.commands.append(
                {
                    "commands": copy.deepcopy(commands),
                    "scope": params.get("scope"),
                    "language_code": params.get("language_code"),
                }
            )
        return True

    def _m_get_my_commands(self, params: JSONDict) -> list[JSONDict]:
        with self._cond:
            return copy.deepcopy(self._my_commands.get(self._commands_key(params), []))

    def _m_delete_my_commands(self, params: JSONDict) -> bool:
        with self._cond:
            self._my_commands.pop(self._commands_key(params), None)
        return True

    def _m_answer_callback_query(self, params: JSONDict) -> bool:
        with self._cond:
            query_id = params.get("callback_query_id")
            if query_id not in self._callback_ids:
                raise _ApiError(
                    400,
                    "Bad Request: query is too old and response timeout expired or query ID is invalid",
                )
            self._callback_ids.discard(query_id)
            self.callback_answers.append(copy.deepcopy(params))
            return True


# --------------------------------------------------------------------------------------------
# HTTP plumbing
# --------------------------------------------------------------------------------------------


def _decode_value(name: str, value: Any) -> Any:
    """Undo PTB's encoding: strings raw, everything else JSON (nested values too)."""
    if not isinstance(value, str) or name in _STRING_FIELDS:
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _parse_body(content_type: str, body: bytes) -> JSONDict:
    """Parse form-urlencoded, multipart/form-data or JSON request bodies."""
    ctype = content_type.split(";", 1)[0].strip().lower()
    if not body:
        return {}
    if ctype == "application/json":
        data = json.loads(body.decode("utf-8"))
        if not isinstance(data, dict):
            raise ValueError("JSON body must be an object")
        return {k: _decode_value(k, v) for k, v in data.items()}
    if ctype == "multipart/form-data":
        raw = b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(raw)
        params: JSONDict = {}
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if not name:
                continue
            payload = part.get_payload(decode=True) or b""
            filename = part.get_filename()
            if filename is not None:
                params[str(name)] = {"filename": filename, "size": len(payload), "content": payload}
            else:
                params[str(name)] = _decode_value(str(name), payload.decode("utf-8"))
        return params
    return {k: _decode_value(k, v) for k, v in parse_qsl(body.decode("utf-8"), keep_blank_values=True)}


class _Handler(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive handler; ``owner`` is bound per server in FakeTelegram.start."""

    owner: FakeTelegram
    protocol_version = "HTTP/1.1"
    server_version = "FakeTelegramBotAPI/1.0"

    def setup(self) -> None:
        super().setup()
        with self.owner._cond:
            self.owner._connections.add(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.owner._cond:
                self.owner._connections.discard(self.connection)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Silenced: test output should show assertions, not access logs."""

    def _handle(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            params = {k: _decode_value(k, v) for k, v in parse_qsl(url.query, keep_blank_values=True)}
            params.update(_parse_body(self.headers.get("Content-Type", ""), body))
        except (ValueError, UnicodeDecodeError):
            status, payload = 400, {"ok": False, "error_code": 400, "description": "Bad Request: can't parse request"}
        else:
            status, payload = self.owner._dispatch(url.path, params)
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = _handle
    do_POST = _handle
