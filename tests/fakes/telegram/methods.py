"""The Bot API method implementations (getUpdates, sendMessage, editMessageText, ...).

Why separate: each ``_m_*`` method is the fake's model of one Bot API call; together they
are the protocol surface the bot under test talks to.
"""

from __future__ import annotations

import copy
import json
import time

from tests.fakes.telegram.failures import _DEFAULT_DESCRIPTIONS, _ApiError
from tests.fakes.telegram.records import JSONDict, _Stored

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


class _BotMethods:
    """``FakeTelegram`` part: one ``_m_*`` method per supported Bot API method."""

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
        self._webhook_set(self._webhook_url, str(params.get("secret_token") or ""))  # starts pushing updates
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

