"""The Cloud API's protocol pieces: webhook signatures, a webhook message as the kit's Incoming, Meta's
error codes as the kit's delivery outcomes, the 24-hour window."""

from __future__ import annotations

import hashlib
import hmac
import logging
import sqlite3

from clawgate.agent.core.schema import STATE, migrate
from clawgate.channels.kit import DeliveryError, Sender, Unconfirmed
from clawgate.channels.kit.store import ChannelStore
from clawgate.channels.whatsapp.events import button_id, incoming_of, press_of
from clawgate.channels.whatsapp.graph import GraphError, delivery_error
from clawgate.channels.whatsapp.webhook import signature_ok
from clawgate.channels.whatsapp.window import ServiceWindow

SECRET = "app-secret"


def _sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_only_the_hmac_of_this_body_with_the_app_secret_passes() -> None:
    body = b'{"object":"whatsapp_business_account"}'
    assert signature_ok(SECRET, body, _sign(body))
    assert signature_ok(SECRET, body, _sign(body).upper().replace("SHA256=", "sha256="))  # hex case is not meaning
    for header in (None, "", _sign(body)[7:], _sign(body + b" "), _sign(body, "other"), "sha1=" + _sign(body)[7:]):
        assert not signature_ok(SECRET, body, header)
    assert not signature_ok("", body, _sign(body, ""))  # no secret configured: nothing is trusted


async def _never(media_id: str, size: int | None) -> bytes:
    raise AssertionError("fetched before admission")


def test_a_message_is_incoming_by_wa_id_with_files_fetched_lazily() -> None:
    sender = Sender(user_id="16505551234", display="Sheena Nelson")
    text = incoming_of({"from": "16505551234", "id": "wamid.A", "timestamp": "1", "type": "text",
                        "text": {"body": "hello"}, "context": {"id": "wamid.OUT1"}}, sender, _never)
    assert text is not None and (text.chat_id, text.text, text.private, text.addressed) == ("16505551234", "hello",
                                                                                           True, True)
    assert text.sender.username is None and text.metadata["reply_to"] == "wamid.OUT1"
    voice = incoming_of({"id": "wamid.B", "type": "audio", "audio": {"id": "77", "mime_type": "audio/ogg"}},
                        sender, _never)
    assert voice is not None and voice.files[0].kind == "voice" and voice.files[0].mime == "audio/ogg"
    sticker = incoming_of({"id": "wamid.C", "type": "sticker", "sticker": {"id": "1"}}, sender, _never)
    assert sticker is not None and sticker.unreadable
    assert incoming_of({"id": "wamid.D", "type": "reaction", "reaction": {"emoji": "👍"}}, sender, _never) is None


def test_an_approval_press_names_its_request_and_nothing_else_does() -> None:
    sender = Sender(user_id="1")
    press = press_of({"id": "wamid.E", "type": "interactive", "interactive": {
        "type": "button_reply", "button_reply": {"id": button_id("ab12:cd", False), "title": "Deny"}}}, sender)
    assert press is not None and (press.approval_id, press.approved) == ("ab12:cd", False)
    other = {"id": "wamid.F", "type": "interactive", "interactive": {
        "type": "button_reply", "button_reply": {"id": "menu-1", "title": "Menu"}}}
    assert press_of(other, sender) is None
    assert incoming_of(other, sender, _never).text == "Menu"  # type: ignore[union-attr]


def test_metas_codes_decide_retry_wait_or_give_up() -> None:
    def outcome(status: int, code: int, subcode: int = 0, retry_after: float | None = None) -> Exception:
        return delivery_error(GraphError(status, code, subcode, "m", retry_after), "a message", rate_wait=30)

    for code in (130429, 131056, 80007, 4):
        e = outcome(400, code)
        assert isinstance(e, DeliveryError) and e.retry_after == 30 and not e.permanent
    assert outcome(429, 130429, retry_after=5).retry_after == 5  # type: ignore[attr-defined]
    auth = outcome(401, 190)
    assert isinstance(auth, DeliveryError) and auth.permanent and auth.channel_down
    window = outcome(400, 131047)
    assert isinstance(window, DeliveryError) and window.permanent and "24-hour" in str(window)
    assert not outcome(500, 131000).permanent  # type: ignore[attr-defined]
    assert outcome(400, 131026).permanent  # type: ignore[attr-defined]
    assert outcome(400, 100).permanent and not outcome(400, 100).too_large  # type: ignore[attr-defined]
    import asyncio
    assert isinstance(delivery_error(asyncio.TimeoutError(), "a message", rate_wait=1), Unconfirmed)


def test_the_window_is_24_hours_from_the_last_message_and_said_once(caplog) -> None:
    db = sqlite3.connect(":memory:", isolation_level=None)
    migrate(db, STATE)
    store = ChannelStore(db, "whatsapp")
    window = ServiceWindow(store, logging.getLogger("test.whatsapp"))
    assert "never written" in (window.refusal("1", now=1000) or "")
    window.wrote("1", 1000)
    assert window.refusal("1", now=1000 + 24 * 3600) is None and window.notice() is None
    with caplog.at_level(logging.WARNING):
        assert "24-hour" in (window.refusal("1", now=1001 + 24 * 3600) or "")
        window.refusal("1", now=1002 + 24 * 3600)
    assert len([r for r in caplog.records if "24-hour" in r.getMessage()]) == 1
    assert "1 chat(s) outside" in (window.notice() or "")
    window.wrote("1", 2000 + 24 * 3600)  # they wrote again: open, and the notice gone
    assert window.refusal("1", now=2001 + 24 * 3600) is None and window.notice() is None


def test_owner_numbers_are_written_as_wa_ids() -> None:
    from clawgate.channels.whatsapp.settings import WhatsAppSettings

    settings = WhatsAppSettings(owner=["+1 (555) 123-4567", "15550001001"], allow_from=["*"])
    assert settings.owner == ["15551234567", "15550001001"] and settings.allow_from == ["*"]
