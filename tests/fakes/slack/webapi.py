"""The Web API methods the fake serves. Each takes the merged request arguments (query string, form
or JSON body: the SDK sends chat.* as JSON and most others as query parameters) and returns the
response body (``ok`` added by the server) or raises ApiError, under the server's lock.

Tokens: methods marked "bot" take the bot token and answer ``not_allowed_token_type`` to the
app-level (xapp-) token; apps.connections.open takes only the app-level token. A token that is
neither is ``invalid_auth``, none at all ``not_authed``. (That auth.test refuses an xapp- token is
an assumption; Slack does not document it.) files.upload (v1, retired by Slack) is not served:
``unknown_method``."""

from __future__ import annotations

import mimetypes
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable

from tests.fakes.slack import workspace as W
from tests.fakes.slack.limits import ApiError, check_message, parse_json_arg

if TYPE_CHECKING:
    from tests.fakes.slack.server import FakeSlack

JSONDict = dict[str, Any]


def _require(params: JSONDict, *names: str) -> None:
    for name in names:
        if params.get(name) in (None, ""):
            raise ApiError("invalid_arguments", response_metadata={"messages": [f"[ERROR] missing required field: {name}"]})


def _channel(fake: "FakeSlack", params: JSONDict, key: str = "channel") -> JSONDict:
    chan = fake.workspace.channels.get(str(params.get(key) or ""))
    if chan is None:
        raise ApiError("channel_not_found")
    return chan


def auth_test(fake: "FakeSlack", params: JSONDict) -> JSONDict:
    return {"url": f"https://{W.TEAM_DOMAIN}.slack.com/", "team": W.TEAM_NAME, "user": W.BOT_NAME,
            "team_id": W.TEAM_ID, "user_id": W.BOT_USER_ID, "bot_id": W.BOT_ID, "is_enterprise_install": False}


def apps_connections_open(fake: "FakeSlack", params: JSONDict) -> JSONDict:
    return {"url": fake.socket.issue_url()}


def chat_post_message(fake: "FakeSlack", params: JSONDict) -> JSONDict:
    _require(params, "channel")
    chan = _channel(fake, params)
    if not chan.get("is_member"):
        raise ApiError("not_in_channel")
    text, blocks = check_message(params, max_text=fake.max_text_chars)
    thread_ts = params.get("thread_ts") or None
    if thread_ts and fake.workspace.find_message(chan["id"], str(thread_ts)) is None:
        raise ApiError("thread_not_found")
    ts = fake.workspace.next_ts()
    msg: JSONDict = {"channel": chan["id"], "ts": ts, "type": "message", "user": W.BOT_USER_ID,
                     "bot_id": W.BOT_ID, "app_id": W.APP_ID, "team": W.TEAM_ID, "text": text or ""}
    if blocks is not None:
        msg["blocks"] = blocks
    if thread_ts:
        msg["thread_ts"] = str(thread_ts)
    for key in ("mrkdwn", "unfurl_links", "unfurl_media", "reply_broadcast", "metadata", "attachments"):
        if key in params:
            msg[key] = parse_json_arg(params[key], "invalid_arguments") if key in ("metadata", "attachments") else params[key]
    fake.workspace.messages.append(msg)
    return {"channel": chan["id"], "ts": ts, "message": {k: v for k, v in msg.items() if k != "channel"}}


def chat_update(fake: "FakeSlack", params: JSONDict) -> JSONDict:
    _require(params, "channel", "ts")
    chan = _channel(fake, params)
    msg = fake.workspace.find_message(chan["id"], str(params["ts"]))
    if msg is None:
        raise ApiError("message_not_found")
    if msg.get("user") != W.BOT_USER_ID:
        raise ApiError("cant_update_message")
    text, blocks = check_message(params, max_text=fake.max_text_chars)
    msg["text"] = text or ""
    if blocks is not None:
        msg["blocks"] = blocks
    msg["edited"] = {"user": W.BOT_USER_ID, "ts": fake.workspace.next_ts()}
    return {"channel": chan["id"], "ts": msg["ts"], "text": msg["text"],
            "message": {k: v for k, v in msg.items() if k != "channel"}}


def chat_delete(fake: "FakeSlack", params: JSONDict) -> JSONDict:
    _require(params, "channel", "ts")
    chan = _channel(fake, params)
    msg = fake.workspace.find_message(chan["id"], str(params["ts"]))
    if msg is None:
        raise ApiError("message_not_found")
    if msg.get("user") != W.BOT_USER_ID:
        raise ApiError("cant_delete_message")
    fake.workspace.messages.remove(msg)
    fake.workspace.deleted.append(msg)
    return {"channel": chan["id"], "ts": msg["ts"]}


def files_info(fake: "FakeSlack", params: JSONDict) -> JSONDict:
    """A person's shared file (see FakeSlack.send_file): its metadata and private URLs."""
    _require(params, "file")
    f = fake.workspace.files.get(str(params["file"]))
    if f is None or not f.get("shared_by_user"):
        raise ApiError("file_not_found")
    return {"file": fake.workspace.file_object(fake.base_url, f)}


def reactions_add(fake: "FakeSlack", params: JSONDict) -> JSONDict:
    _require(params, "channel", "timestamp", "name")
    chan = _channel(fake, params)
    msg = fake.workspace.find_message(chan["id"], str(params["timestamp"]))
    if msg is None:
        raise ApiError("message_not_found")
    name = str(params["name"]).strip(":")
    reactions = msg.setdefault("reactions", [])
    for r in reactions:
        if r["name"] == name:
            if W.BOT_USER_ID in r["users"]:
                raise ApiError("already_reacted")
            r["users"].append(W.BOT_USER_ID)
            r["count"] += 1
            return {}
    reactions.append({"name": name, "users": [W.BOT_USER_ID], "count": 1})
    return {}


def conversations_info(fake: "FakeSlack", params: JSONDict) -> JSONDict:
    return {"channel": dict(_channel(fake, params))}


def users_info(fake: "FakeSlack", params: JSONDict) -> JSONDict:
    user = fake.workspace.users.get(str(params.get("user") or ""))
    if user is None:
        raise ApiError("user_not_found")
    return {"user": dict(user)}


def files_get_upload_url_external(fake: "FakeSlack", params: JSONDict) -> JSONDict:
    _require(params, "filename", "length")
    try:
        length = int(params["length"])
    except (TypeError, ValueError):
        raise ApiError("invalid_arguments") from None
    if length <= 0:
        raise ApiError("invalid_arguments")
    file_id = fake.workspace.next_id("F")
    fake.workspace.files[file_id] = {
        "id": file_id, "name": str(params["filename"]), "title": str(params["filename"]),
        "length": length, "data": None, "completed": False, "alt_txt": params.get("alt_txt"),
        "upload_key": uuid.uuid4().hex,
    }
    upload_url = f"{fake.base_url}/upload/v1/{fake.workspace.files[file_id]['upload_key']}"
    return {"upload_url": upload_url, "file_id": file_id}


def files_complete_upload_external(fake: "FakeSlack", params: JSONDict) -> JSONDict:
    _require(params, "files")
    items = parse_json_arg(params["files"], "invalid_arguments")
    if not isinstance(items, list) or not items:
        raise ApiError("invalid_arguments")
    channel_id = params.get("channel_id") or None
    chan = _channel(fake, params, "channel_id") if channel_id else None
    if chan is not None and not chan.get("is_member"):
        raise ApiError("not_in_channel")
    thread_ts = params.get("thread_ts") or None
    if thread_ts and (chan is None or fake.workspace.find_message(chan["id"], str(thread_ts)) is None):
        raise ApiError("invalid_thread_ts" if chan is None else "thread_not_found")
    out = []
    for item in items:
        f = fake.workspace.files.get(str(item.get("id")))
        if f is None or f["data"] is None:
            raise ApiError("file_not_found")  # never uploaded to its URL
        if len(f["data"]) != f["length"]:
            raise ApiError("upload_size_mismatch")  # fake-specific name: Slack's is not documented
        f["completed"] = True
        if item.get("title"):
            f["title"] = item["title"]
        out.append(_file_object(fake, f, chan, thread_ts))
    if chan is not None:
        msg = {"channel": chan["id"], "ts": fake.workspace.next_ts(), "type": "message",
               "user": W.BOT_USER_ID, "bot_id": W.BOT_ID, "text": params.get("initial_comment") or "",
               "files": [o["id"] for o in out], "upload": True}
        if thread_ts:
            msg["thread_ts"] = str(thread_ts)
        fake.workspace.messages.append(msg)
        for o in out:
            kind = "private" if chan.get("is_private") else "public"
            o["shares"] = {kind: {chan["id"]: [{"ts": msg["ts"], **({"thread_ts": thread_ts} if thread_ts else {})}]}}
    return {"files": out}


def _file_object(fake: "FakeSlack", f: JSONDict, chan: JSONDict | None, thread_ts: Any) -> JSONDict:
    mimetype = mimetypes.guess_type(f["name"])[0] or "application/octet-stream"
    return {"id": f["id"], "created": int(time.time()), "timestamp": int(time.time()), "name": f["name"],
            "title": f["title"], "mimetype": mimetype, "filetype": f["name"].rsplit(".", 1)[-1],
            "user": W.BOT_USER_ID, "size": f["length"], "is_public": bool(chan and not chan.get("is_private")),
            "url_private": f"{fake.base_url}/files-pri/{W.TEAM_ID}-{f['id']}/{f['name']}",
            "channels": [chan["id"]] if chan else [], "shares": {}}


# method → (handler, token kind it needs: "bot" for xoxb-/xoxp-, "app" for xapp-)
METHODS: dict[str, tuple[Callable[["FakeSlack", JSONDict], JSONDict], str]] = {
    "auth.test": (auth_test, "bot"),
    "apps.connections.open": (apps_connections_open, "app"),
    "chat.postMessage": (chat_post_message, "bot"),
    "chat.update": (chat_update, "bot"),
    "chat.delete": (chat_delete, "bot"),
    "files.info": (files_info, "bot"),
    "reactions.add": (reactions_add, "bot"),
    "conversations.info": (conversations_info, "bot"),
    "users.info": (users_info, "bot"),
    "files.getUploadURLExternal": (files_get_upload_url_external, "bot"),
    "files.completeUploadExternal": (files_complete_upload_external, "bot"),
}

