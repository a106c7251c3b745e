"""``FakeTelegram`` itself: its state, lifecycle, dispatch and the HTTP handler.

Why separate: this is the only part that touches sockets and threads; it combines the
other modules' parts into one object and routes each HTTP request to a Bot API method.

All state is guarded by one lock/condition because the HTTP server answers from many
threads while the test thread injects and inspects.
"""

from __future__ import annotations

import contextlib
import copy
import email.parser
import email.policy
import http.server
import json
import socket
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from tests.fakes.telegram.failures import _ApiError, _Failure, _FailureInjection
from tests.fakes.telegram.media import _Media
from tests.fakes.telegram.methods import _BotMethods
from tests.fakes.telegram.observation import _Observation
from tests.fakes.telegram.params import _ParamChecks
from tests.fakes.telegram.records import JSONDict, _Queued, _Stored
from tests.fakes.telegram.updates import _UpdateInjection

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


class FakeTelegram(_UpdateInjection, _Observation, _FailureInjection, _ParamChecks, _BotMethods, _Media):
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
        self._migrated: dict[int | str, int] = {}  # group id -> its supergroup's id (migrate_group)
        self._my_commands: dict[str, list[JSONDict]] = {}
        self._closing = False
        self._media_init()

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
                "getFile": self._m_get_file,
                "sendDocument": self._m_send_document,
                "setMessageReaction": self._m_set_message_reaction,
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
            self._refuse_migrated(params)
            if entry is None:
                raise _ApiError(404, "Not Found")
            result = entry[1](params)
        except _ApiError as err:
            body: JSONDict = {"ok": False, "error_code": err.status, "description": err.description}
            if err.parameters:
                body["parameters"] = err.parameters
            return err.status, body
        return 200, {"ok": True, "result": result}


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
    # Headers and body go out in two writes; with Nagle on, the second waits ~40 ms for an ACK.
    disable_nagle_algorithm = True

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

    def _stream_body(self, file_id: str, piece: bytes, count: int) -> None:
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        sent = 0
        # a reader that stops early (the daemon at its size limit) is what this serves: what it took is counted
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for _ in range(count):
                self.wfile.write(piece)
                sent += len(piece)
            self.wfile.flush()
        self.owner.stream_sent(file_id, sent)

    def _handle(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        prefix = f"/file/bot{self.owner.token}/"
        path = unquote(url.path)  # clients percent-encode the token's ":" in file URLs
        streamed = self.owner.file_stream(path[len(prefix):]) if path.startswith(prefix) else None
        if streamed is not None:  # no Content-Length: the body ends when the connection closes
            self._stream_body(*streamed)
            return
        if path.startswith("/file/bot"):  # a file download (after getFile)
            content = self.owner.file_download(path[len(prefix):]) if path.startswith(prefix) else None
            self.send_response(200 if content is not None else 404)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(content or b"")))
            self.end_headers()
            self.wfile.write(content or b"")
            return
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
