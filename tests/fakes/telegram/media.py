"""Media and webhooks in the fake: photos, documents and voice notes a user sends, getFile and the
file download, setMessageReaction, and webhook delivery with Telegram's retry-until-200.

Why separate: the rest of the fake models text chats; this part models files (which the bot
fetches in two steps, getFile then GET /file/bot<token>/<path>) and the push direction.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

from tests.fakes.telegram.failures import _ApiError
from tests.fakes.telegram.records import JSONDict, _Stored

WEBHOOK_RETRY_SECONDS = 0.2
MAX_UPLOAD_BYTES = 50 * 1024 * 1024  # the Bot API's upload limit for bots


class _Media:
    """``FakeTelegram`` part: media updates, files, reactions and the webhook pusher."""

    def _media_init(self) -> None:
        self.files: dict[str, bytes] = {}  # file_id -> content
        self.file_paths: dict[str, str] = {}  # file_path -> file_id
        self.reactions: list[JSONDict] = []
        self.webhook_posts: list[tuple[int, int]] = []  # (update_id, HTTP status or 0 for no answer)
        self._webhook_secret = ""
        self._webhook_thread: threading.Thread | None = None
        self._next_file = 1
        self.documents: list[JSONDict] = []  # what the bot sent with sendDocument: chat_id, file_name, content, caption
        # file_id -> (piece, count): a download with no Content-Length, the piece written `count` times as read
        self.streamed: dict[str, tuple[bytes, int]] = {}
        self.streamed_sent: dict[str, int] = {}  # file_id -> bytes the reader took before it stopped or it ended

    # -------------------------------------------------------------- user sends media
    def _store_file(self, data: bytes, suffix: str) -> JSONDict:
        with self._cond:
            n = self._next_file
            self._next_file += 1
            file_id = f"FILE{n:04d}{'x' * 20}"
            self.files[file_id] = data
            path = f"files/file_{n}{suffix}"
            self.file_paths[path] = file_id
        return {"file_id": file_id, "file_unique_id": f"U{n:04d}", "file_size": len(data)}

    def _inject_media(self, chat_id: int, fields: JSONDict, caption: str | None, user_id: int | None) -> int:
        with self._cond:
            user = self._user(chat_id if user_id is None else user_id, None, "Test")
            chat = self._chat_for(chat_id, "private", user)
            message_id = self._new_message_id(chat_id)
            message: JSONDict = {"message_id": message_id, "from": user, "chat": chat, "date": int(time.time()),
                                 **fields}
            if caption is not None:
                message["caption"] = caption
            self._messages.setdefault(chat_id, {})[message_id] = _Stored(message=message, from_bot=False,
                                                                         raw_text=caption or "")
            return self._push_update({"message": message})

    def inject_photo(self, chat_id: int, data: bytes, *, caption: str | None = None, user_id: int | None = None,
                     thumbnail: bytes = b"\xff\xd8thumb") -> int:
        """A photo as Telegram sends it: several sizes, smallest first (the bot should take the largest)."""
        small = {**self._store_file(thumbnail, ".jpg"), "width": 90, "height": 60}
        large = {**self._store_file(data, ".jpg"), "width": 1280, "height": 853}
        return self._inject_media(chat_id, {"photo": [small, large]}, caption, user_id)

    def inject_document(self, chat_id: int, data: bytes, file_name: str, *, mime_type: str = "application/octet-stream",
                        caption: str | None = None, user_id: int | None = None, declared_size: int | None = None) -> int:
        document = {**self._store_file(data, ""), "file_name": file_name, "mime_type": mime_type}
        if declared_size is not None:
            document["file_size"] = declared_size
        return self._inject_media(chat_id, {"document": document}, caption, user_id)

    def inject_unsized_document(self, chat_id: int, file_name: str, *, piece: bytes, count: int,
                                user_id: int | None = None) -> int:
        """A document Telegram gives no `file_size` for (it is optional), whose download arrives without
        Content-Length: `piece` written `count` times, as fast as the bot reads it (what a hostile or broken
        server can do; the bot must stop reading at its limit)."""
        stored = self._store_file(b"", "")
        del stored["file_size"]
        with self._cond:
            self.streamed[stored["file_id"]] = (piece, count)
        return self._inject_media(chat_id, {"document": {**stored, "file_name": file_name}}, None, user_id)

    def inject_voice(self, chat_id: int, data: bytes = b"OggS-voice", *, user_id: int | None = None) -> int:
        voice = {**self._store_file(data, ".oga"), "duration": 3, "mime_type": "audio/ogg"}
        return self._inject_media(chat_id, {"voice": voice}, None, user_id)

    # -------------------------------------------------------------- Bot API methods
    def _m_get_file(self, params: JSONDict) -> JSONDict:
        file_id = str(params.get("file_id") or "")
        with self._cond:
            if file_id not in self.files:
                raise _ApiError(400, "Bad Request: invalid file_id")
            path = next(p for p, f in self.file_paths.items() if f == file_id)
            if file_id in self.streamed:  # its size is not said
                return {"file_id": file_id, "file_unique_id": "U" + file_id[4:8], "file_path": path}
            return {"file_id": file_id, "file_unique_id": "U" + file_id[4:8], "file_size": len(self.files[file_id]),
                    "file_path": path}

    def _m_send_document(self, params: JSONDict) -> JSONDict:
        """sendDocument with an uploaded file, refused as the Bot API refuses it: no file, an empty one,
        a caption over 1024 characters (400), a file over 50 MB (413)."""
        chat_id = self._chat_id(params)
        upload = params.get("document")
        if not isinstance(upload, dict):
            raise _ApiError(400, "Bad Request: there is no document in the request")
        if upload["size"] > MAX_UPLOAD_BYTES:
            raise _ApiError(413, "Request Entity Too Large")
        if upload["size"] == 0:
            raise _ApiError(400, "Bad Request: file must be non-empty")
        caption = params.get("caption")
        if caption is not None and len(str(caption)) > 1024:
            raise _ApiError(400, "Bad Request: message caption is too long")
        stored = self._store_file(upload["content"], "")
        with self._cond:
            message_id = self._new_message_id(chat_id)
            message: JSONDict = {"message_id": message_id, "from": self.bot_user, "chat": self._known_chat(chat_id),
                                 "date": int(time.time()),
                                 "document": {**stored, "file_name": upload["filename"]}}
            if caption is not None:
                message["caption"] = caption
            thread_id = self._int(params, "message_thread_id")
            if thread_id is not None:
                message["message_thread_id"] = thread_id
            self._messages.setdefault(chat_id, {})[message_id] = _Stored(message=message, from_bot=True,
                                                                         raw_text=str(caption or ""))
            self.documents.append({"chat_id": chat_id, "file_name": upload["filename"], "content": upload["content"],
                                   "caption": caption, "message_thread_id": thread_id, "message_id": message_id})
            self._cond.notify_all()
            return message

    def _m_set_message_reaction(self, params: JSONDict) -> bool:
        chat_id, message_id = self._int(params, "chat_id", 0), self._int(params, "message_id", 0)
        reaction = params.get("reaction")
        if isinstance(reaction, str):
            reaction = json.loads(reaction)
        with self._cond:
            if message_id not in self._messages.get(chat_id, {}):
                raise _ApiError(400, "Bad Request: message to react not found")
            self.reactions.append({"chat_id": chat_id, "message_id": message_id, "reaction": reaction})
            self._cond.notify_all()
        return True

    def file_stream(self, path: str) -> tuple[str, bytes, int] | None:
        """GET /file/bot<token>/<file_path> of an unsized document: (file_id, piece, count), or None."""
        with self._cond:
            file_id = self.file_paths.get(path)
            return (file_id, *self.streamed[file_id]) if file_id in self.streamed else None

    def stream_sent(self, file_id: str, sent: int) -> None:
        with self._cond:
            self.streamed_sent[file_id] = sent
            self._cond.notify_all()

    def file_download(self, path: str) -> bytes | None:
        """GET /file/bot<token>/<file_path>: the content, or None (404)."""
        with self._cond:
            file_id = self.file_paths.get(path)
            return self.files.get(file_id) if file_id else None

    # -------------------------------------------------------------- webhook delivery
    def _webhook_set(self, url: str, secret: str) -> None:
        with self._cond:
            self._webhook_secret = secret
            if url and (self._webhook_thread is None or not self._webhook_thread.is_alive()):
                self._webhook_thread = threading.Thread(target=self._push_webhooks, name="FakeTelegramWebhook",
                                                        daemon=True)
                self._webhook_thread.start()
            self._cond.notify_all()

    def _push_webhooks(self) -> None:
        """Deliver queued updates one at a time, in order; anything but 200 is retried, as Telegram does."""
        while True:
            with self._cond:
                while not self._closing and not (self._webhook_url and self._queue):
                    self._cond.wait(0.5)
                if self._closing:
                    return
                entry, url, secret = self._queue[0], self._webhook_url, self._webhook_secret
            request = urllib.request.Request(url, data=json.dumps(entry.update).encode(), method="POST",
                                             headers={"Content-Type": "application/json",
                                                      **({"X-Telegram-Bot-Api-Secret-Token": secret} if secret else {})})
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    status = answer.status
            except urllib.error.HTTPError as exc:
                status = exc.code
            except OSError:
                status = 0
            with self._cond:
                self.webhook_posts.append((entry.update_id, status))
                if status == 200 and self._queue and self._queue[0] is entry:
                    self._queue.pop(0)
                    self._confirmed_offset = max(self._confirmed_offset, entry.update_id + 1)
                self._cond.notify_all()
            if status != 200:
                time.sleep(WEBHOOK_RETRY_SECONDS)

    def webhook_delivered(self) -> list[int]:
        with self._cond:
            return [update_id for update_id, status in self.webhook_posts if status == 200]
