"""Reading and checking Bot API parameters: ids, message text, reply markup.

Why separate: every method validates its parameters the same way Telegram rejects
common mistakes, so these checks are shared.
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.telegram.failures import _ApiError
from tests.fakes.telegram.html import HtmlParseError, _parse_html
from tests.fakes.telegram.records import JSONDict

MAX_MESSAGE_LENGTH = 4096
MAX_CALLBACK_DATA_BYTES = 64

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


class _ParamChecks:
    """``FakeTelegram`` part: parameter parsing and validation used by the methods."""

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
