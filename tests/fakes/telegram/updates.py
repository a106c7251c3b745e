"""Building Update/Message/Chat/User objects and queueing them for getUpdates.

Why separate: this is how a test plays the user (messages, button presses, redelivery),
independent of how the bot's own calls are answered.
"""

from __future__ import annotations

import copy
import time

from tests.fakes.telegram.records import JSONDict, _Queued, _Stored

def _utf16_len(text: str) -> int:
    """Telegram entity offsets/lengths are in UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


class _UpdateInjection:
    """``FakeTelegram`` part: users, chats and the update queue as the user side fills it."""

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

    def migrate_group(self, old_chat_id: int, new_chat_id: int, *, user_id: int, announce: bool = True) -> None:
        """The group becomes a supergroup with a new id, as Telegram does it: every later call naming the
        old chat fails with 400 and ``parameters.migrate_to_chat_id``; with ``announce``, the two service
        messages (``migrate_to_chat_id`` in the old chat, ``migrate_from_chat_id`` in the new) are queued."""
        with self._cond:
            self._migrated[old_chat_id] = new_chat_id
            if not announce:
                return
            user = self._users.get(user_id) or self._user(user_id, None, "Test")
            old = self._known_chat(old_chat_id)
            new = self._chat_for(new_chat_id, "supergroup", None)
            for chat, field, other in ((old, "migrate_to_chat_id", new_chat_id), (new, "migrate_from_chat_id", old_chat_id)):
                self._push_update({"message": {"message_id": self._new_message_id(chat["id"]), "from": user,
                                               "chat": chat, "date": int(time.time()), field: other}})
