"""What the fake Feishu stores (users, messages, the calls the bot made) and how it refuses: the
content checks of the real message API and its JSON error answers."""

from __future__ import annotations

import json
import secrets
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

TENANT = "tenant_fake"


def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(16)


@dataclass(frozen=True)
class User:
    open_id: str
    union_id: str
    name: str


@dataclass
class Message:
    id: str
    chat_id: str
    sender: str  # open_id, or the app id for the bot
    msg_type: str
    content: str
    parent_id: str = ""
    root_id: str = ""
    thread_id: str = ""
    deleted: bool = False
    edits: list[str] = field(default_factory=list)  # earlier contents, oldest first
    at: float = 0.0

    def json(self) -> dict[str, Any]:
        return {"message_id": self.id, "root_id": self.root_id, "parent_id": self.parent_id,
                "thread_id": self.thread_id, "msg_type": self.msg_type, "create_time": str(int(self.at * 1000)),
                "update_time": str(int(self.at * 1000)), "deleted": self.deleted, "updated": bool(self.edits),
                "chat_id": self.chat_id, "sender": {"id": self.sender, "id_type": "app_id", "sender_type": "app",
                                                    "tenant_key": TENANT},
                "body": {"content": self.content}}


@dataclass
class Call:
    method: str
    path: str
    body: Any
    at: float  # time.monotonic()


class Refusal(Exception):
    def __init__(self, status: int, code: int, msg: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(msg)
        self.status, self.code, self.msg, self.headers = status, code, msg, headers or {}


def check_content(msg_type: str, content: str) -> None:
    """What the real API refuses: content that is not the type's JSON, or over its size."""
    try:
        data = json.loads(content)
    except ValueError:
        raise Refusal(400, 230001, "Your request contains an invalid request parameter: content is not JSON") from None
    limit = 150 * 1024 if msg_type == "text" else 30 * 1024
    if len(content.encode()) > limit:
        raise Refusal(400, 230025, "The message content is too long.")
    if msg_type == "post":
        body = data.get("zh_cn") or data.get("en_us") if isinstance(data, dict) else None
        if not isinstance(body, dict) or not isinstance(body.get("content"), list):
            raise Refusal(400, 230001, "invalid post content")
    elif msg_type == "interactive":
        if not isinstance(data, dict) or not isinstance(data.get("elements"), list):
            raise Refusal(400, 230099, "Failed to create card content")
    elif msg_type == "text":
        if not isinstance(data, dict) or not isinstance(data.get("text"), str):
            raise Refusal(400, 230001, "invalid text content")
    elif msg_type == "file":
        if not isinstance(data, dict) or not data.get("file_key"):
            raise Refusal(400, 230001, "invalid file content")
    else:
        raise Refusal(400, 230001, f"unsupported msg_type {msg_type!r}")


def error(status: int, code: int, msg: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"code": code, "msg": msg, "error": {"log_id": uuid.uuid4().hex}}, status=status,
                             headers=headers)
