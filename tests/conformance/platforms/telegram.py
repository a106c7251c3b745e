"""The Telegram channel's conformance harness: the fake Bot API (tests/fakes/telegram) with call times."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.conformance.harness import PlatformHarness, Shown
from tests.fakes.telegram_api import FakeTelegram

GROUP = -100777


class TimedTelegram(FakeTelegram):
    """The fake Bot API, noting when each call arrived (for the retry-after case)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.times: list[tuple[str, float]] = []

    def _dispatch(self, path: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.times.append((path.rsplit("/", 1)[-1], time.monotonic()))
        return super()._dispatch(path, params)


class TelegramHarness(PlatformHarness):
    name = "telegram"
    max_chars = 4096
    buttons = True
    owner, friend, stranger = "1001", "1002", "1003"
    ack_window = 2.0  # the daemons here long-poll for 1 s

    def __init__(self) -> None:
        self.fake = TimedTelegram()
        self._presses: dict[str, list[int]] = {}  # user -> indexes into fake.callback_answers
        self._token = self.fake.token

    def start(self) -> None:
        self.fake.start()

    def close(self) -> None:
        self.fake.stop()

    def env(self, **access: Any) -> dict[str, str]:
        values = {"base_url": self.fake.base_url, "poll_timeout_seconds": 1, "pairing_check_seconds": 0.2,
                  **access}
        out = {"TELEGRAM_BOT_TOKEN": self._token}
        for key, value in values.items():
            out[f"CLAWGATE_CHANNELS__TELEGRAM__{key.upper()}"] = value if isinstance(value, str) else json.dumps(value)
        return out

    def send_dm(self, user: str, text: str) -> int:
        return self.fake.inject_message(int(user), text, username=f"user{user}")

    def send_group(self, user: str, text: str, *, mention: bool) -> int:
        said = f"@{self.fake.bot_username} {text}" if mention else text
        return self.fake.inject_message(GROUP, said, user_id=int(user), username=f"user{user}", chat_type="group")

    def redeliver(self, event: int) -> None:
        self.fake.redeliver(event)

    def acknowledged(self, event: int) -> bool:
        return self.fake.confirmed_offset > event

    def dm_chat(self, user: str) -> str:
        return user

    def group_chat(self) -> str:
        return str(GROUP)

    def _sent(self, chat: str) -> list[dict[str, Any]]:
        return [m for m in list(self.fake.sent) if str(m["chat_id"]) == chat]

    def replies(self, chat: str) -> list[str]:
        return [m["plain_text"] for m in self._sent(chat) if not m["text"].startswith(("⚙️", "⏳"))
                and not m.get("reply_markup")]

    def formats(self, chat: str) -> list[set[str]]:
        return [{e["type"] for e in m.get("entities") or []} for m in self._sent(chat)
                if not m["text"].startswith(("⚙️", "⏳")) and not m.get("reply_markup")]

    def prompts(self, chat: str) -> list[str]:
        out = []
        for m in self._sent(chat):
            for row in (m.get("reply_markup") or {}).get("inline_keyboard", []):
                data = row[0]["callback_data"]
                out.append(data.split(":")[1])
        return out

    def press_approval(self, user: str, approval_id: str, approve: bool) -> None:
        for m in list(self.fake.sent):
            keyboard = (m.get("reply_markup") or {}).get("inline_keyboard", [])
            if keyboard and keyboard[0][0]["callback_data"].split(":")[1] == approval_id:
                before = len(self.fake.callback_answers)
                self.fake.inject_callback(m["chat_id"], int(user), f"ap:{approval_id}:{'y' if approve else 'n'}",
                                          m["message_id"])
                self._presses.setdefault(user, []).append(before)
                return
        raise AssertionError(f"no approval prompt {approval_id} was sent")

    def approval_answers(self, user: str) -> list[str]:
        # answers come in press order; a press's answer is the first one after the answers before it
        answers = list(self.fake.callback_answers)
        return [answers[i]["text"] for i in self._presses.get(user, []) if i < len(answers)]

    def approval_view(self, chat: str) -> list[Shown]:
        """Prompt messages start with 🔐; their code is the text under their `pre` entities (UTF-16 offsets)."""
        out = []
        for m in self._sent(chat):
            if not m["text"].startswith("🔐"):
                continue
            units = m["text"].encode("utf-16-le")
            code = "".join(units[2 * e["offset"]:2 * (e["offset"] + e["length"])].decode("utf-16-le")
                           for e in m.get("entities") or [] if e["type"] == "pre")
            out.append(Shown(m["plain_text"], code, bool(m.get("reply_markup"))))
        return out

    def status_lines(self, chat: str) -> list[str]:
        return [m["plain_text"] for m in self._sent(chat) if m["text"].startswith(("⚙️", "⏳"))]

    def send_attempts(self) -> list[float]:
        return [t for name, t in list(self.fake.times) if name == "sendMessage"]

    def inject_429(self, seconds: int) -> None:
        self.fake.fail_next("sendMessage", status=429, retry_after=seconds)

    def inject_permanent_error(self) -> None:
        self.fake.fail_next("sendMessage", status=400, description="Bad Request: chat not found")

    def break_token(self) -> None:
        self._token = "999999:rejected-token-for-the-test"

    def stop_server(self) -> None:
        self.fake.stop()


HARNESS = TelegramHarness
