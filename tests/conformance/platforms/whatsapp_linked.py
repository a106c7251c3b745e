"""The WhatsApp channel's harness in linked-device mode: the fake neonize client in the daemon
(tests/fakes/whatsapp_linked/client.py, named by WHATSAPP_LINKED_TEST_CLIENT) and the fake
WhatsApp it talks to, here.

An event is one `MessageEv`, named by its sequence number at the fake; its acknowledgement is the
fake client reporting that the adapter's handler returned. Approvals are typed (`/approve ID`): a linked
device has no buttons (an owner's reaction works too: tests/e2e/test_whatsapp_linked_e2e.py). WhatsApp
cannot edit a message (typing, no status line). whatsmeow's rate-limit error names no retry time: the
daemon waits its `rate_limit_retry_seconds`, set here to what the case asks for.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.conformance.harness import PlatformHarness, Shown
from tests.fakes.whatsapp.reading import formats_of, plain_of
from tests.fakes.whatsapp_linked import GROUP, FakeWhatsAppLinked
from tests.fakes.whatsapp_linked.wire import SERVER_VARIABLE

ROOT = Path(__file__).resolve().parents[3]
ANSWERS = ("Only the owner", "Approved.", "Denied.", "This request is no longer pending", "Say which request")
RATE_WAIT = 2
PHONE = "s.whatsapp.net"


class WhatsAppLinkedHarness(PlatformHarness):
    name = "whatsapp"
    max_chars = 4096
    buttons = False
    owner, friend, stranger = "15550002001", "15550002002", "15550002003"
    ack_window = 2.0
    not_applicable = {
        "test_a_crash_between_intake_and_acknowledgement_loses_nothing": (
            "neonize acknowledges a message to WhatsApp before the handler runs (whatsmeow without "
            "SynchronousAck; neonize's Go handler only queues the event), so WhatsApp does not deliver again what "
            "a killed daemon had not stored: docs/whatsapp.md says what is lost"),
        "test_a_status_line_quotes_arguments_readably_escaped_and_short": "WhatsApp cannot edit a message: typing "
                                                                          "presence, no status line",
    }

    def __init__(self) -> None:
        self.fake = FakeWhatsAppLinked()

    def start(self) -> None:
        self.fake.start()

    def close(self) -> None:
        self.fake.stop()

    def python_path(self) -> list[str]:
        return [str(ROOT)]  # the fake client is tests.fakes.whatsapp_linked.client

    def env(self, **access: Any) -> dict[str, str]:
        values = {"mode": "linked", "rate_limit_retry_seconds": RATE_WAIT, "pairing_check_seconds": 0.2, **access}
        env = {f"CLAWGATE_CHANNELS__WHATSAPP__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
               for k, v in values.items()}
        return {**env, "WHATSAPP_LINKED_TEST_CLIENT": "tests.fakes.whatsapp_linked.client",
                SERVER_VARIABLE: self.fake.address}

    # users writing --------------------------------------------------------------------------------------
    def send_dm(self, user: str, text: str) -> int:
        return self.fake.text(user, text)

    def send_group(self, user: str, text: str, *, mention: bool) -> int:
        return self.fake.group_text(user, text, mention=mention)

    def redeliver(self, event: int) -> None:
        self.fake.redeliver(event)

    def acknowledged(self, event: int) -> bool:
        return event in self.fake.handled

    # what the bot sent ------------------------------------------------------------------------------------
    def dm_chat(self, user: str) -> str:
        return f"{user}@{PHONE}"

    def group_chat(self) -> str:
        return GROUP

    def _texts(self, chat: str) -> list[str]:
        return [s.text for s in self.fake.to(chat)]

    def replies(self, chat: str) -> list[str]:
        return [p for p in (plain_of(t) for t in self._texts(chat)) if not p.startswith(("🔐", *ANSWERS))]

    def command_answers(self, chat: str) -> list[str]:
        return [p for p in (plain_of(t) for t in self._texts(chat)) if not p.startswith("🔐")]

    def formats(self, chat: str) -> list[set[str]]:
        return [formats_of(t) for t in self._texts(chat) if not plain_of(t).startswith(("🔐", *ANSWERS))]

    def _prompts(self) -> list[tuple[str, str]]:
        out = []
        for sent in list(self.fake.sent):
            found = re.search(r"/approve ([A-Za-z0-9_-]+)", sent.text) if plain_of(sent.text).startswith("🔐") else None
            if found:
                out.append((found.group(1), sent.to))
        return out

    def prompts(self, chat: str) -> list[str]:
        return [approval for approval, to in self._prompts() if to == chat]

    def press_approval(self, user: str, approval_id: str, approve: bool) -> None:
        self.fake.text(user, f"/{'approve' if approve else 'deny'} {approval_id}")

    def approval_answers(self, user: str) -> list[str]:
        return [p for p in (plain_of(t) for t in self._texts(self.dm_chat(user))) if p.startswith(ANSWERS)]

    def approval_view(self, chat: str) -> list[Shown]:
        out = []
        for text in self._texts(chat):
            if not plain_of(text).startswith("🔐"):
                continue
            code = "".join(c.removeprefix("\n").removesuffix("\n") for c in re.findall(r"```(.+?)```", text, re.S))
            out.append(Shown(plain_of(text), code, "/approve " in text))
        return out

    # failures ---------------------------------------------------------------------------------------------
    def send_attempts(self) -> list[float]:
        return list(self.fake.attempts)

    def inject_429(self, seconds: int) -> None:
        assert seconds == RATE_WAIT, "the daemon is configured to wait RATE_WAIT after a rate limit"
        self.fake.fail_next("server returned error 429: rate-overlimit")

    def inject_permanent_error(self) -> None:
        self.fake.fail_next("server returned error 406: not-acceptable")

    def break_token(self) -> None:
        self.fake.log_out()

    def stop_server(self) -> None:
        self.fake.stop()


HARNESS = WhatsAppLinkedHarness
