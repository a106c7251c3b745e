"""The Slack channel's conformance harness: the fake Slack server (tests/fakes/slack), Socket Mode."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.conformance.harness import PlatformHarness, Shown
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, MAX_TEXT_CHARS, Envelope, FakeSlack
from tests.fakes.slack_api import workspace as W
from tests.waiting import wait_until

STATUS = ("⚙️", "⏳")
FRIEND, STRANGER = "U0FRIEND01", "U0STRANGE1"
DMS = {W.OWNER_ID: W.OWNER_DM, FRIEND: "D0FRIEND01", STRANGER: "D0STRANGE1"}
_FENCE = re.compile(r"```.*?```", re.S)


def plain(mrkdwn: str) -> str:
    """What a person reads in a mrkdwn message: markers and Slack's escaping gone."""
    text = mrkdwn.replace("```", "")
    text = re.sub(r"<([^|>]+)\|([^>]+)>", r"\2", text)
    text = re.sub(r"`([^`\n]+)`", r"\1", text)
    text = re.sub(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])", r"\1", text)
    text = re.sub(r"(?<![\w_])_([^_\n]+)_(?![\w_])", r"\1", text)
    text = re.sub(r"(?<![\w~])~([^~\n]+)~(?![\w~])", r"\1", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").strip()


def _unescape(mrkdwn: str) -> str:
    return mrkdwn.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def formats(mrkdwn: str) -> set[str]:
    kinds = {"pre"} if _FENCE.search(mrkdwn) else set()
    rest = _FENCE.sub("", mrkdwn)
    if re.search(r"`[^`\n]+`", rest):
        kinds.add("code")
    rest = re.sub(r"`[^`\n]+`", "", rest)
    if re.search(r"(?<![\w*])\*[^*\n]+\*(?![\w*])", rest):
        kinds.add("bold")
    if re.search(r"(?<![\w_])_[^_\n]+_(?![\w_])", rest):
        kinds.add("italic")
    return kinds


class SlackHarness(PlatformHarness):
    name = "slack"
    max_chars = MAX_TEXT_CHARS
    buttons = True
    owner, friend, stranger = W.OWNER_ID, FRIEND, STRANGER
    ack_window = 2.0

    def __init__(self) -> None:
        self.fake = FakeSlack(ack_timeout=3.0)
        self._bot_token = BOT_TOKEN
        self._presses: dict[str, list[str]] = {}  # user -> response_url ids of their presses
        self._thread: str | None = None  # ts of the last mention in the group: the conversation there

    def start(self) -> None:
        self.fake.start()
        with self.fake._cond:
            for user, name in ((FRIEND, "friend"), (STRANGER, "stranger")):
                self.fake.workspace.add_user(user, name)
                self.fake.workspace.add_channel(DMS[user], is_im=True, user=user)

    def close(self) -> None:
        self.fake.stop()

    def env(self, **access: Any) -> dict[str, str]:
        # a lost Socket Mode connection is reported after lost_after_seconds (60 by default): short here,
        # so "the platform went away" shows within the suite's deadline
        values = {"enabled": True, "bot_token": self._bot_token, "app_token": APP_TOKEN,
                  "base_url": self.fake.api_url, "lost_after_seconds": 3, **access}
        out = {name: "" for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")}
        for key, value in values.items():
            out[f"CLAWGATE_CHANNELS__SLACK__{key.upper()}"] = value if isinstance(value, str) else json.dumps(value)
        return out

    def send_dm(self, user: str, text: str) -> Envelope:
        return self.fake.send_message(text, user=user, channel=DMS[user])

    def send_group(self, user: str, text: str, *, mention: bool) -> Envelope:
        if mention:
            env = self.fake.send_mention(text, user=user, channel=W.GENERAL)
            self._thread = env.payload["event"]["ts"]
            return env
        return self.fake.send_message(text, user=user, channel=W.GENERAL)

    def send_command(self, user: str, command: str, *, group: bool = False) -> Envelope:
        """In private, the app's `/clawgate <cmd>` slash command; in the group, a mention in the thread of the
        last one (the conversation there is the thread; the slash command acts on the channel)."""
        if group:
            return self.fake.send_mention(command, user=user, channel=W.GENERAL, thread_ts=self._thread)
        return self.fake.slash_command("/clawgate", command.removeprefix("/"), user=user, channel=DMS[user])

    def redeliver(self, event: Envelope) -> None:
        self.fake.redeliver(event)

    def acknowledged(self, event: Envelope) -> bool:
        return any(e.acked for e in self.fake.envelopes_for(event.event_id or ""))

    def dm_chat(self, user: str) -> str:
        return DMS[user]

    def group_chat(self) -> str:
        return W.GENERAL

    def _sent(self, chat: str) -> list[dict[str, Any]]:
        return [m for m in self.fake.posted(chat) if not m["text"].startswith(STATUS + ("🔐",))
                and not m.get("blocks")]

    def replies(self, chat: str) -> list[str]:
        return [plain(m["text"]) for m in self._sent(chat)]

    def formats(self, chat: str) -> list[set[str]]:
        return [formats(m["text"]) for m in self._sent(chat)]

    def _buttons(self, chat: str | None = None) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        return [(m, el) for m in self.fake.posted(chat) for block in m.get("blocks") or []
                for el in block.get("elements") or [] if el.get("type") == "button"]

    def prompts(self, chat: str) -> list[str]:
        return list(dict.fromkeys(el["value"] for _, el in self._buttons(chat)))

    def press_approval(self, user: str, approval_id: str, approve: bool) -> None:
        wanted = "clawgate_approve" if approve else "clawgate_deny"
        for message, el in self._buttons():
            if el["value"] == approval_id and el["action_id"] == wanted:
                env = self.fake.press_button(message["ts"], wanted, channel=message["channel"], user=user)
                self._presses.setdefault(user, []).append(env.payload["response_url"].rsplit("/", 1)[-1])
                wait_until(lambda: env.acked, "the button press acknowledged")
                return
        raise AssertionError(f"no approval prompt {approval_id} was sent")

    def approval_answers(self, user: str) -> list[str]:
        answered = {rid: body.get("text", "") for rid, body in list(self.fake.responses)}
        return [answered[rid] for rid in self._presses.get(user, []) if rid in answered]

    def approval_view(self, chat: str) -> list[Shown]:
        """A prompt's messages start with 🔐: the last one's text is in its section blocks, with the buttons."""
        out = []
        for m in self.fake.posted(chat):
            blocks = m.get("blocks") or []
            sections = [b["text"]["text"] for b in blocks if b.get("type") == "section"]
            text = "".join(sections) if sections else m["text"]
            if text.startswith("🔐"):
                code = "".join(_unescape(c) for c in re.findall(r"```\n(.*?)\n```", text, re.S))
                out.append(Shown(plain(text), code, any(b.get("type") == "actions" for b in blocks)))
        return out

    def status_lines(self, chat: str) -> list[str]:
        return [plain(str(c.params.get("text", ""))) for c in self.fake.calls_to("chat.postMessage")
                if c.params.get("channel") == chat and str(c.params.get("text", "")).startswith(STATUS)]

    def send_attempts(self) -> list[float]:
        return [c.at for c in self.fake.calls_to("chat.postMessage")
                if not str(c.params.get("text", "")).startswith(STATUS) and not c.params.get("blocks")]

    def inject_429(self, seconds: int) -> None:
        self.fake.rate_limit("chat.postMessage", retry_after=seconds)

    def inject_permanent_error(self) -> None:
        self.fake.fail("chat.postMessage", "channel_not_found")

    def break_token(self) -> None:
        self._bot_token = "xoxb-0000000001-0000000002-revokedtoken"

    def stop_server(self) -> None:
        self.fake.stop()


HARNESS = SlackHarness
