"""An owner is reached in their private chat before they ever wrote, on platforms whose ids are not numbers
(an IRC services account, a Signal UUID): a guest's request for approval is asked of them there, end to
end (the real daemon, the real IRC network of tests/irc_server.py and the fake signal-cli), and their
answer runs it. Where the platform cannot reach them first (a Matrix room, WhatsApp), the chat is the one
they last wrote from (channels/kit/kit.py owner_chats, PlatformAdapter.owner_chat)."""

from __future__ import annotations

from typing import Callable

import pytest

from tests.conformance.harness import make_harness
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.harness import DaemonProcess
from tests.waiting import DEFAULT_TIMEOUT, wait_until


@pytest.mark.parametrize("name", ["irc", "signal"])
def test_a_guests_request_is_asked_of_an_owner_who_never_wrote(name: str, daemon_factory: Callable[..., DaemonProcess],
                                                               fake_model: FakeAnthropic) -> None:
    platform = make_harness(name)
    platform.start()
    try:
        assert not platform.owner.isdigit()  # the case: an owner id that is no number
        env = platform.env(owner=[platform.owner], allow_from=[platform.friend], dm_policy="allowlist",
                           retry_base_seconds=0.05)
        daemon = daemon_factory({**env, "CLAWGATE_CHANNELS__DELIVERY_RETRY_SECONDS": "0.2"})
        platform.attach(daemon)
        fake_model.enqueue(tool_use("exec", {"argv": ["touch", "asked.txt"]}), text("Made it."))
        platform.send_dm(platform.friend, "make a file")
        owner_chat = platform.dm_chat(platform.owner)
        (approval,) = wait_until(lambda: platform.prompts(owner_chat), "the prompt in the owner's private chat",
                                 timeout=DEFAULT_TIMEOUT, describe=daemon.log_text)
        assert not platform.prompts(platform.dm_chat(platform.friend))  # never asked of the guest
        assert "no owner chat to ask" not in daemon.log_text()
        platform.press_approval(platform.owner, approval, True)
        wait_until(lambda: "Made it." in platform.replies(platform.dm_chat(platform.friend)), "the guest's answer",
                   timeout=DEFAULT_TIMEOUT, describe=daemon.log_text)
        assert (daemon.guest_workspace(f"{name}:{platform.friend}") / "asked.txt").exists()
    finally:
        platform.close()
