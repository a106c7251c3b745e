"""The WhatsApp channel's harness (Cloud API): the fake Graph API and webhook sender (tests/fakes/whatsapp).

An event is one webhook update, named by its message's wamid; the platform's acknowledgement is the
daemon's 200 to a delivery of it (the fake retries until it gets one, as Meta does). Approvals are
interactive reply buttons; a press is the person's `button_reply` message. The Cloud API has no
groups and WhatsApp cannot edit a message (no status line), so those cases do not apply. Meta's
rate-limit errors carry no retry time: the daemon waits its `rate_limit_retry_seconds`, set here to
the seconds the case asks for.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.conformance.harness import PlatformHarness, Shown
from tests.fakes.whatsapp import APP_SECRET, PHONE_NUMBER_ID, TOKEN, VERIFY_TOKEN, FakeWhatsApp, formats_of, plain_of
from tests.harness import free_port

ANSWERS = ("Only the owner", "Approved.", "Denied.", "This request is no longer pending", "Say which request")
RATE_WAIT = 2  # the wait the rate-limit case asks for (inject_429(2))
NO_GROUPS = "the Cloud API has no groups: every chat is one person's"


class WhatsAppHarness(PlatformHarness):
    name = "whatsapp"
    max_chars = 4096
    buttons = True
    owner, friend, stranger = "15550001001", "15550001002", "15550001003"
    ack_window = 2.0
    not_applicable = {
        "test_the_access_matrix": NO_GROUPS + " (strangers: tests/e2e/test_whatsapp_e2e.py)",
        "test_the_model_is_told_who_speaks_in_a_shared_conversation": NO_GROUPS,
        "test_a_guest_cannot_stop_or_reset_the_owners_shared_conversation": NO_GROUPS,
        "test_a_status_line_quotes_arguments_readably_escaped_and_short": "WhatsApp cannot edit a message: typing "
                                                                          "indicator, no status line",
    }

    def __init__(self) -> None:
        self.fake = FakeWhatsApp()
        self._token = TOKEN

    def start(self) -> None:
        self.fake.start()

    def close(self) -> None:
        self.fake.stop()

    def env(self, **access: Any) -> dict[str, str]:
        port = free_port()
        self.fake.webhook_url = f"http://127.0.0.1:{port}/whatsapp/webhook"
        values = {"access_token": self._token, "phone_number_id": PHONE_NUMBER_ID, "app_secret": APP_SECRET,
                  "verify_token": VERIFY_TOKEN, "base_url": self.fake.base_url, "webhook_port": port,
                  "check_seconds": 1, "rate_limit_retry_seconds": RATE_WAIT, "pairing_check_seconds": 0.2, **access}
        return {f"CLAWGATE_CHANNELS__WHATSAPP__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
                for k, v in values.items()}

    # users writing --------------------------------------------------------------------------------------
    def send_dm(self, user: str, text: str) -> str:
        return self.fake.inject_message(user, text=text)

    def send_group(self, user: str, text: str, *, mention: bool) -> str:
        raise NotImplementedError(NO_GROUPS)

    def redeliver(self, event: str) -> None:
        self.fake.redeliver(event)

    def acknowledged(self, event: str) -> bool:
        return self.fake.acknowledged(event)

    # what the bot sent ------------------------------------------------------------------------------------
    def dm_chat(self, user: str) -> str:
        return user

    def group_chat(self) -> str:
        raise NotImplementedError(NO_GROUPS)

    def _sent(self, chat: str) -> list[dict[str, Any]]:
        return [m for m in list(self.fake.sent) if m["to"] == chat]

    def _texts(self, chat: str) -> list[str]:
        return [m["text"]["body"] for m in self._sent(chat) if m["type"] == "text"]

    def replies(self, chat: str) -> list[str]:
        return [p for p in (plain_of(t) for t in self._texts(chat)) if not p.startswith(("🔐", *ANSWERS))]

    def command_answers(self, chat: str) -> list[str]:
        """Every text in the chat but prompts: an answer to `/approve` about no such request is one too."""
        return [p for p in (plain_of(t) for t in self._texts(chat)) if not p.startswith("🔐")]

    def formats(self, chat: str) -> list[set[str]]:
        return [formats_of(t) for t in self._texts(chat) if not plain_of(t).startswith(("🔐", *ANSWERS))]

    def _prompts(self) -> list[tuple[str, dict[str, Any]]]:
        out = []
        for m in list(self.fake.sent):
            if m["type"] == "interactive":
                button = m["interactive"]["action"]["buttons"][0]["reply"]["id"]
                out.append((button.removeprefix("clawgate-ap:").rsplit(":", 1)[0], m))
        return out

    def prompts(self, chat: str) -> list[str]:
        return [approval for approval, m in self._prompts() if m["to"] == chat]

    def press_approval(self, user: str, approval_id: str, approve: bool) -> None:
        for approval, m in self._prompts():
            if approval == approval_id:
                buttons = m["interactive"]["action"]["buttons"]
                reply = buttons[0 if approve else 1]["reply"]
                self.fake.press_button(user, reply["id"], reply["title"], m["id"])
                return
        raise AssertionError(f"no approval prompt {approval_id} was sent")

    def approval_answers(self, user: str) -> list[str]:
        return [p for p in (plain_of(t) for t in self._texts(user)) if p.startswith(ANSWERS)]

    def approval_view(self, chat: str) -> list[Shown]:
        """A prompt's messages start with 🔐: texts, and the last one the interactive message with the buttons."""
        out = []
        for m in self._sent(chat):
            text = m["text"]["body"] if m["type"] == "text" else (
                m["interactive"]["body"]["text"] if m["type"] == "interactive" else "")
            if not plain_of(text).startswith("🔐"):
                continue
            code = "".join(c.removeprefix("\n").removesuffix("\n") for c in re.findall(r"```(.+?)```", text, re.S))
            out.append(Shown(plain_of(text), code, m["type"] == "interactive"))
        return out

    # failures ---------------------------------------------------------------------------------------------
    def send_attempts(self) -> list[float]:
        return list(self.fake.attempts)

    def inject_429(self, seconds: int) -> None:
        assert seconds == RATE_WAIT, "the daemon is configured to wait RATE_WAIT after a rate limit"
        self.fake.fail_next(status=400, code=130429, message="(#130429) Rate limit hit")

    def inject_permanent_error(self) -> None:
        self.fake.fail_next(status=400, code=131026, message="(#131026) Message Undeliverable.")

    def break_token(self) -> None:
        self._token = "EAAGthisisnotthetokenthefakeknows"

    def stop_server(self) -> None:
        self.fake.stop()


HARNESS = WhatsAppHarness
