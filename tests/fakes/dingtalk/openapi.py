"""FakeDingTalk's OpenAPI side (the module docstring of server.py lists each endpoint): access tokens, robot
messages, cards, file download and upload, session webhooks, and what the robot sent. A mixin of
FakeDingTalk, whose lock and state (people, groups, tokens, sessions, failures) these handlers use."""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Person:
    staff_id: str  # the organisation's user id (senderStaffId)
    sender_id: str  # the app-scoped id (senderId)
    nick: str


@dataclass
class Sent:
    chat: str  # a 1:1 chat by the user's staff id, a group by its conversation id
    text: str
    title: str
    via: str  # "webhook", "openapi" or "card"
    at: float
    track: str = ""  # a card's outTrackId
    buttons: list[str] = field(default_factory=list)  # a card's button ids that call back
    params: dict[str, Any] = field(default_factory=dict)  # a card's cardParamMap
    file: bytes | None = None  # a file message's file


class OpenApi:
    async def _access_token(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return openapi_error(400, "invalidParameter", "body is not JSON")
        with self._lock:
            self.token_requests += 1
            if body.get("appKey") != self.client_id or body.get("appSecret") != self.client_secret:
                return openapi_error(400, "invalidClientIdOrSecret", "无效的clientId或者clientSecret")
            token = secrets.token_hex(16)
            self._tokens.add(token)
        return web.json_response({"accessToken": token, "expireIn": 7200})

    def _refusal(self, path: str) -> tuple[dict[str, Any], int] | None:
        with self._lock:
            self.attempts.append((path, time.monotonic()))
            return self._failures.pop(0) if self._failures else None

    async def _robot_send(self, request: web.Request) -> web.Response:
        with self._lock:
            authorized = request.headers.get("x-acs-dingtalk-access-token", "") in self._tokens
        if not authorized:
            return openapi_error(401, "InvalidAuthentication", "不合法的access_token")
        try:
            body = await request.json()
        except ValueError:
            return openapi_error(400, "invalidParameter", "body is not JSON")
        if body.get("robotCode") != self.client_id:
            return openapi_error(400, "invalidParameter.robotCode.notExsit", "robotCode does not exist")
        try:
            text, title = _message_param(str(body.get("msgKey") or ""), body.get("msgParam"))
        except ValueError as e:
            return openapi_error(400, "invalidParameter.msgParam.invalid", str(e))
        file: bytes | None = None
        if body.get("msgKey") == "sampleFile":
            with self._lock:
                stored = self.media.get(json.loads(body["msgParam"]).get("mediaId") or "")
            if stored is None:
                return openapi_error(400, "invalidParameter.msgParam.invalid", "mediaId is not an uploaded file")
            file = stored[1]
        refusal = self._refusal(request.path)
        if refusal is not None:
            return openapi_error(refusal[1], str(refusal[0]["code"]), str(refusal[0]["message"]))
        if request.path.endswith("batchSend"):
            users = body.get("userIds")
            if not isinstance(users, list) or not users:
                return openapi_error(400, "invalidParameter.userIds.empty", "userIds is empty")
            with self._lock:
                invalid = [u for u in users if u not in self.people]
                for user in users:
                    if user in self.people:
                        self._record(Sent(user, text, title, "openapi", time.monotonic(), file=file))
            return web.json_response({"processQueryKey": secrets.token_urlsafe(12), "invalidStaffIdList": invalid,
                                      "flowControlledStaffIdList": []})
        conversation = str(body.get("openConversationId") or "")
        with self._lock:
            if conversation not in self.groups:
                return openapi_error(400, "invalid.openConversationId", "openConversationId is invalid")
            self._record(Sent(conversation, text, title, "openapi", time.monotonic(), file=file))
        return web.json_response({"processQueryKey": secrets.token_urlsafe(12)})

    async def _upload(self, request: web.Request) -> web.Response:
        with self._lock:
            authorized = request.query.get("access_token", "") in self._tokens
        if not authorized:
            return web.json_response({"errcode": 40014, "errmsg": "不合法的access_token"})
        if not request.content_type.startswith("multipart/"):
            return web.json_response({"errcode": 40035, "errmsg": "not multipart"})
        form = await request.post()
        media = form.get("media")
        if form.get("type") != "file" or not hasattr(media, "file"):
            return web.json_response({"errcode": 40035, "errmsg": "type file and media are required"})
        data = media.file.read()  # type: ignore[union-attr]
        if len(data) > 20 * 1024 * 1024:
            return web.json_response({"errcode": 40006, "errmsg": "file too large"})
        media_id = "@" + secrets.token_urlsafe(20)
        with self._lock:
            self.media[media_id] = (str(media.filename), data)  # type: ignore[union-attr]
        return web.json_response({"errcode": 0, "errmsg": "ok", "media_id": media_id, "type": "file",
                                  "created_at": int(time.time() * 1000)})

    async def _download_link(self, request: web.Request) -> web.Response:
        with self._lock:
            authorized = request.headers.get("x-acs-dingtalk-access-token", "") in self._tokens
        if not authorized:
            return openapi_error(401, "InvalidAuthentication", "不合法的access_token")
        try:
            body = await request.json()
        except ValueError:
            return openapi_error(400, "invalidParameter", "body is not JSON")
        if body.get("robotCode") != self.client_id:
            return openapi_error(400, "invalidParameter.robotCode.notExsit", "robotCode does not exist")
        code = str(body.get("downloadCode") or "")
        with self._lock:
            if code not in self._files:
                return openapi_error(400, "invalidParameter.downloadCode", "downloadCode is invalid")
            name = secrets.token_urlsafe(18)
            self._links[name] = code
        return web.json_response({"downloadUrl": f"{self.url}/download/{name}"})

    async def _download(self, request: web.Request) -> web.StreamResponse:
        with self._lock:
            code = self._links.pop(request.match_info["name"], None)  # a link is good for one download
            data = self._files.get(code or "")
            self.downloads += data is not None
        if data is None:
            return web.Response(status=404, text="no such file")
        return web.Response(body=data, content_type="application/octet-stream")

    async def _card(self, request: web.Request) -> web.Response:
        with self._lock:
            authorized = request.headers.get("x-acs-dingtalk-access-token", "") in self._tokens
        if not authorized:
            return openapi_error(401, "InvalidAuthentication", "不合法的access_token")
        try:
            body = await request.json()
        except ValueError:
            return openapi_error(400, "invalidParameter", "body is not JSON")
        track, space = str(body.get("outTrackId") or ""), str(body.get("openSpaceId") or "")
        params = (body.get("cardData") or {}).get("cardParamMap") if isinstance(body.get("cardData"), dict) else None
        if not body.get("cardTemplateId") or not track or not isinstance(params, dict):
            return openapi_error(400, "invalidParameter.card", "cardTemplateId, outTrackId and cardData are required")
        if body.get("callbackType") != "STREAM":
            return openapi_error(400, "invalidParameter.callbackType", "this fake delivers callbacks over Stream only")
        kind, _, chat = space.removeprefix("dtv1.card//").partition(".")
        model = body.get("imRobotOpenDeliverModel" if kind == "IM_ROBOT" else "imGroupOpenDeliverModel") or {}
        with self._lock:
            known = chat in self.people if kind == "IM_ROBOT" else chat in self.groups if kind == "IM_GROUP" else False
        if not known:
            return openapi_error(400, "invalidParameter.openSpaceId", f"openSpaceId {space!r} names no chat")
        if model.get("robotCode") != self.client_id:
            return openapi_error(400, "invalidParameter.robotCode", "the deliver model's robotCode is wrong")
        try:
            layout = json.loads(str(params.get("sys_full_json_obj") or "{}"))
        except ValueError:
            return openapi_error(400, "invalidParameter.cardData", "sys_full_json_obj is not JSON")
        buttons = [str(b.get("id")) for b in layout.get("msgButtons") or [] if isinstance(b, dict) and b.get("request")]
        refusal = self._refusal(request.path)
        if refusal is not None:
            return openapi_error(refusal[1], str(refusal[0]["code"]), str(refusal[0]["message"]))
        with self._lock:
            self._record(Sent(chat, str(params.get("staticMsgContent") or ""), str(params.get("msgTitle") or ""),
                                  "card", time.monotonic(), track, buttons, dict(params)))
        return web.json_response({"success": True, "result": {"outTrackId": track, "deliverResults": [
            {"spaceType": kind, "spaceId": chat, "success": True, "carrierId": secrets.token_hex(8)}]}})

    async def _session_send(self, request: web.Request) -> web.Response:
        with self._lock:
            found = self._sessions.get(request.query.get("session", ""))
        if found is None:
            return web.json_response({"errcode": 300001, "errmsg": "session not found"})
        chat, expires = found
        if time.time() >= expires:
            return web.json_response({"errcode": 300001, "errmsg": "session expired"})
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"errcode": 40035, "errmsg": "body is not JSON"})
        kind = body.get("msgtype")
        if kind == "markdown" and isinstance(body.get("markdown"), dict) and body["markdown"].get("text"):
            text, title = str(body["markdown"]["text"]), str(body["markdown"].get("title") or "")
            if not title:
                return web.json_response({"errcode": 40035, "errmsg": "markdown.title missing"})
        elif kind == "text" and isinstance(body.get("text"), dict) and body["text"].get("content"):
            text, title = str(body["text"]["content"]), ""
        else:
            return web.json_response({"errcode": 40035, "errmsg": "msgtype and its content missing"})
        refusal = self._refusal(request.path)
        if refusal is not None:
            return web.json_response({"errcode": refusal[0]["errcode"], "errmsg": refusal[0]["errmsg"]})
        with self._lock:
            self._record(Sent(chat, text, title, "webhook", time.monotonic()))
        return web.json_response({"errcode": 0, "errmsg": "ok"})



def _message_param(key: str, raw: Any) -> tuple[str, str]:
    """(text, title) of a robot message template's parameters; ValueError for what DingTalk refuses."""
    try:
        param = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        param = None
    if not isinstance(param, dict):
        raise ValueError("msgParam must be a JSON object string")
    if key == "sampleMarkdown":
        if not param.get("text") or not param.get("title"):
            raise ValueError("sampleMarkdown needs title and text")
        return str(param["text"]), str(param["title"])
    if key == "sampleFile":
        if not param.get("mediaId") or not param.get("fileName") or not param.get("fileType"):
            raise ValueError("sampleFile needs mediaId, fileName and fileType")
        return f"📎 {param['fileName']}", ""
    if key == "sampleText":
        if not param.get("content"):
            raise ValueError("sampleText needs content")
        return str(param["content"]), ""
    raise ValueError(f"msgKey {key!r} is not a template this fake knows")


def openapi_error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"code": code, "message": message, "requestid": secrets.token_hex(8)}, status=status)
