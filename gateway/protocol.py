"""The gateway's wire protocol, free of I/O: parse requests, build responses and events.

Frames are JSON text:
  request  {"type":"req","id":"…","method":"…","params":{…}}
  response {"type":"res","id":"…","ok":true,"payload":{…}}
           {"type":"res","id":"…","ok":false,"error":{"code":"…","message":"…"}}
  event    {"type":"event","event":"…","payload":{…},"seq":N}
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from clawgate.agent.core.jsontext import encoder

PROTOCOL_VERSION = 1

# Error codes: one list, used everywhere.
INVALID_FRAME = "invalid_frame"        # not JSON, or not a request object
INVALID_PARAMS = "invalid_params"      # params do not match the method
UNKNOWN_METHOD = "unknown_method"
UNAUTHORIZED = "unauthorized"
FORBIDDEN = "forbidden"                # authenticated, but not allowed to do this
NOT_FOUND = "not_found"
CONFLICT = "conflict"
UNAVAILABLE = "unavailable"
INTERNAL = "internal_error"


class ProtocolError(Exception):
    def __init__(self, code: str, message: str, request_id: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id


@dataclass
class Request:
    id: str
    method: str
    params: dict[str, Any] = field(default_factory=dict)


def parse_request(data: str | bytes) -> Request:
    """Parse one frame; raise ProtocolError carrying the request id when it could be read."""
    if isinstance(data, bytes):
        raise ProtocolError(INVALID_FRAME, "binary frames are not accepted; send JSON text frames")
    try:
        frame = json.loads(data)
    except (json.JSONDecodeError, RecursionError):
        raise ProtocolError(INVALID_FRAME, "frame is not valid JSON") from None
    if not isinstance(frame, dict):
        raise ProtocolError(INVALID_FRAME, "frame must be a JSON object")
    rid = frame.get("id")
    rid = rid if isinstance(rid, str) and rid else None
    if frame.get("type") != "req":
        raise ProtocolError(INVALID_FRAME, 'frame must have "type": "req"', rid)
    if rid is None:
        raise ProtocolError(INVALID_FRAME, 'request needs a non-empty string "id"')
    method = frame.get("method")
    if not isinstance(method, str) or not method:
        raise ProtocolError(INVALID_FRAME, 'request needs a string "method"', rid)
    params = frame.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise ProtocolError(INVALID_PARAMS, '"params" must be an object', rid)
    return Request(rid, method, params)


_encode = encoder(compact=True, default=str)  # json.dumps(frame, ensure_ascii=False, separators=(",", ":"), default=str)


def _dump(frame: dict[str, Any]) -> str:
    return _encode(frame)


def response_ok(request_id: str | None, payload: dict[str, Any] | None = None) -> str:
    return _dump({"type": "res", "id": request_id, "ok": True, "payload": payload or {}})


def response_error(request_id: str | None, code: str, message: str) -> str:
    return _dump({"type": "res", "id": request_id, "ok": False, "error": {"code": code, "message": message}})


def event_frame(name: str, payload: dict[str, Any], seq: int) -> str:
    return _dump({"type": "event", "event": name, "payload": payload, "seq": seq})
