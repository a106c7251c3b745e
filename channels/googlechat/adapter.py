"""GoogleChatAdapter: a Google Chat app on an HTTP endpoint for the channel kit (docs/googlechat.md).

Google POSTs each interaction event to the endpoint (listener.py) with a bearer JWT checked before
anything is read (auth.py); a message is answered `{}` only once `kit.receive` returned, and the reply
goes out later through the Chat API as the app (`spaces.messages.create` with the service account's
`chat.bot` token; api.py), in the thread of the message it answers, in Chat's own formatting
(`*bold*`, `_italic_`, `~strike~`, `` `code` ``, ```` ```block``` ````, `<url|text>`), at most 4,096
characters a message. The status line is a message edited in place. Approvals are a card with
Approve / Deny buttons whose parameters carry a per-prompt secret; a click is answered privately to
the presser, and only an owner's counts (the kit's rule). The Chat API is asked every `check_seconds`
whether it answers: an endpoint alone hears nothing when Google is unreachable.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
from typing import Any, ClassVar

from pydantic import BaseModel

from clawgate.channels.googlechat.api import ApiError, ChatApi, SentMaybe
from clawgate.channels.googlechat.auth import KEY_FIX, BearerVerifier, KeyProblem, key_info
from clawgate.channels.googlechat.events import APPROVAL_FUNCTION, click, incoming, is_private, user_name
from clawgate.channels.googlechat.settings import GoogleChatSettings
from clawgate.channels.kit import (
    Capabilities,
    ChannelAuthError,
    ChannelKit,
    ChannelUnavailable,
    DeliveryError,
    PlatformAdapter,
    Target,
    Unconfirmed,
)
from clawgate.channels.kit.markdown import render_in_pieces
from clawgate.channels.kit.marks import MarkerStyle, label_then_url, to_markers
from clawgate.channels.kit.probe import ProbeResult, logged_in, refused, unreachable, wrong_base_url

MAX_CHARS = 4096  # a message's text (the Chat API's limit)
SPLIT_AT = 3_600  # Markdown per piece, leaving room for the markers and links conversion adds
AUDIENCE_FIX = ("the app's authentication audience from the Chat API's Configuration page (the project number, "
                "or the HTTP endpoint URL) in [channels.googlechat] audience")


def _link(label: str, url: str) -> str:
    """Chat's `<url|label>`; a link whose label is its url is left for Chat to make clickable."""
    return f"<{url}|{label}>" if url and label.strip() and label != url else label_then_url(label, url)


GOOGLE_CHAT = MarkerStyle(link=_link)


def to_chat(markdown: str) -> str:
    """One piece of Markdown in Chat's formatting. `<users/…>` is Chat's mention syntax (`<users/all>`
    notifies everyone): one the model wrote is shown as text, never a mention."""
    return to_markers(markdown, GOOGLE_CHAT).replace("<users/", "‹users/")


def render_chunks(markdown: str) -> list[str]:
    """Markdown as messages of at most MAX_CHARS (no formatting spans two messages)."""
    return [text for text, _ in render_in_pieces(markdown, to_chat, MAX_CHARS, SPLIT_AT)]


class GoogleChatAdapter(PlatformAdapter):
    name: ClassVar[str] = "googlechat"
    settings_model: ClassVar[type[GoogleChatSettings]] = GoogleChatSettings
    # A Cloud project holds one Chat app, and its audience (the project number, or the endpoint URL) names it
    account_fields: ClassVar[tuple[str, ...]] = ("audience",)
    # plain HTTPS both ways: in a fleet every process listens (events taken in are durable and deduplicated
    # fleet-wide) and calls the Chat API itself; no connection to hold (docs/fleet.md)
    exclusive_connection: ClassVar[bool] = False
    capabilities: ClassVar[Capabilities] = Capabilities(max_chars=MAX_CHARS, edit=True, threads=True, buttons=True)

    def __init__(self, settings: GoogleChatSettings, kit: ChannelKit) -> None:  # type: ignore[override]
        super().__init__(settings, kit)
        self.settings: GoogleChatSettings = settings
        self.api = ChatApi(settings)
        self.listener: Any = None
        self.app = ""

    # -- lifecycle --------------------------------------------------------------------------
    @classmethod
    async def probe(cls, settings: BaseModel) -> ProbeResult:
        """A token for the service account key and one page of the app's spaces: nothing is sent."""
        assert isinstance(settings, GoogleChatSettings)
        try:
            info = key_info(settings)
        except KeyProblem as e:
            return refused("Google Chat", "service account key", "channels.googlechat.credentials_file", str(e))
        if not settings.audience:
            return refused("Google Chat", "no audience", "channels.googlechat.audience", AUDIENCE_FIX)
        api = ChatApi(settings)
        try:
            found = await api.check()
        except ApiError as e:
            if e.auth:
                return refused("Google Chat", str(e), "channels.googlechat.credentials_file", KEY_FIX)
            if e.status == 404:
                return wrong_base_url("Google Chat", api.endpoint, 404, "channels.googlechat.base_url")
            if e.status == 0:
                return unreachable("Google Chat", api.endpoint, str(e), "channels.googlechat.base_url")
            if e.status == 403:
                return refused("Google Chat", str(e), "the Chat API in the Cloud project",
                               "enable the Google Chat API and configure the app (docs/googlechat.md)")
            return ProbeResult("warn", f"the Chat API answered {e}; not confirmed", "try again later")
        except SentMaybe as e:
            return unreachable("Google Chat", api.endpoint, str(e), "channels.googlechat.base_url")
        except KeyProblem as e:
            return refused("Google Chat", "service account key", "channels.googlechat.credentials_file", str(e))
        finally:
            api.close()
        return logged_in(f"service account {info.get('client_email')} (project {info.get('project_id')}): "
                         f"the Chat API at {api.endpoint} answered ({found})")

    async def connect(self) -> None:
        s = self.settings
        try:
            self.app = str(key_info(s).get("client_email") or "")
        except KeyProblem as e:
            raise ChannelAuthError(f"Google Chat: {e}") from None
        if not s.audience:
            raise ChannelAuthError(f"Google Chat: no audience: put {AUDIENCE_FIX}")
        await self._check()
        if self.listener is None:
            from clawgate.channels.googlechat.listener import EventListener

            verifier = BearerVerifier(s, timeout=s.request_timeout_seconds)
            listener = EventListener(host=s.listen_host, port=s.listen_port, path=s.path, verifier=verifier,
                                     handler=self._on_event, log=self.kit.log, reuse_port=self.kit.in_fleet)
            try:
                await listener.start()
            except OSError as e:
                raise ChannelUnavailable(f"Google Chat endpoint cannot listen on {s.listen_host}:{s.listen_port}: "
                                         f"{e.strerror or e}") from None
            self.listener = listener
        self.kit.log.info("connected to Google Chat as %s; events accepted at %s", self.app, self.listener.url)

    async def _check(self) -> None:
        try:
            await self.api.check()
        except ApiError as e:
            if e.auth:
                raise ChannelAuthError(f"Google Chat refused the app's credentials ({e}): put {KEY_FIX}") from None
            if e.status == 404:
                raise ChannelAuthError(f"{self.api.endpoint} is not the Chat API (HTTP 404): check "
                                       "[channels.googlechat] base_url") from None
            raise ChannelUnavailable(f"Google Chat API: {e}") from None
        except SentMaybe as e:
            raise ChannelUnavailable(f"Google Chat API: {e}") from None
        except KeyProblem as e:  # a key file whose private key cannot be read
            raise ChannelAuthError(f"Google Chat: {e}") from None

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.settings.check_seconds)
            await self._check()

    async def disconnect(self) -> None:
        listener, self.listener = self.listener, None
        if listener is not None:
            await listener.close()
        self.api.close()

    def status(self) -> dict[str, Any]:
        facts: dict[str, Any] = {}
        if self.app:
            facts["bot"] = self.app
        if self.listener is not None:
            facts["url"] = self.listener.url
        return facts

    # -- receiving --------------------------------------------------------------------------
    async def _on_event(self, event: dict[str, Any]) -> dict[str, Any]:
        """The HTTP answer to one verified event, returned once what it carries is durable."""
        kind = event.get("type")
        if kind == "CARD_CLICKED":
            return await self._on_click(event)
        if kind == "ADDED_TO_SPACE":
            self.kit.log.info("Google Chat: added to %s by %s", (event.get("space") or {}).get("name"),
                              (event.get("user") or {}).get("name"))
            if not isinstance(event.get("message"), dict):  # added with a mention: that message is read below
                return {}
            event = {**event, "type": "MESSAGE"}
        message = incoming(event)
        if message is not None:
            await self.kit.receive(message)
        return {}

    async def _on_click(self, event: dict[str, Any]) -> dict[str, Any]:
        pressed = click(event)
        if pressed is None:
            return {}
        expected = self.kit.store.kv_get(f"approval_secret:{pressed.approval_id}")
        if not expected or not hmac.compare_digest(expected.encode(), pressed.secret.encode()):
            line = "This button is not one of this app's current prompts."
        else:
            line = await self.kit.approval_answer(pressed.approval_id, pressed.user, pressed.approve,
                                                  chat_id=pressed.space or None)
        if not line:
            return {}
        answer: dict[str, Any] = {"text": line}
        if not is_private(event.get("space") or {}):  # only the presser sees the answer
            answer["privateMessageViewer"] = {"name": user_name(pressed.user.user_id)}
        return answer

    # -- sending ----------------------------------------------------------------------------
    def render(self, markdown: str) -> list[str]:
        return render_chunks(markdown)

    async def _create(self, target: Target, message: dict[str, Any], what: str) -> str:
        try:
            return await self.api.create(target.chat_id, message, target.thread_id, send_key=target.send_key)
        except ApiError as e:
            raise self._delivery_error(e, what) from None
        except SentMaybe as e:
            raise Unconfirmed(str(e)) from None

    def _delivery_error(self, e: ApiError, what: str) -> DeliveryError:
        if e.auth:
            return DeliveryError(f"Google Chat refused the app's credentials: put {KEY_FIX}", permanent=True,
                                 channel_down=True)
        if e.status == 429:
            return DeliveryError(f"Google Chat rate limit on {what}",
                                 retry_after=e.retry_after or self.settings.rate_limit_retry_seconds)
        if e.status == 0 or e.status >= 500:
            return DeliveryError(f"Google Chat failed {what}: {e}")
        if e.status == 400 and "too long" in e.message.lower():
            return DeliveryError(f"Google Chat refused {what} as too long", permanent=True, too_large=True)
        return DeliveryError(f"Google Chat refused {what}: {e}", permanent=True)

    async def send_text(self, target: Target, text: str) -> str:
        return await self._create(target, {"text": str(text)}, "a message")

    async def edit_text(self, target: Target, message_id: str, text: str) -> None:
        """The new text; the cards replaced by none, so a prompt's buttons go with the edit."""
        try:
            await self.api.update(message_id, {"text": str(text)}, ["text", "cards_v2"])
        except ApiError as e:
            raise self._delivery_error(e, "an edit") from None
        except SentMaybe as e:
            raise Unconfirmed(str(e)) from None

    async def delete(self, target: Target, message_id: str) -> None:
        try:
            await self.api.delete(message_id)
        except ApiError as e:
            if e.status != 404:  # already gone is deleted
                raise self._delivery_error(e, "a delete") from None
        except SentMaybe as e:
            raise DeliveryError(f"Google Chat: delete not confirmed ({e})") from None

    async def send_approval(self, target: Target, approval_id: str, text: str) -> str | None:
        """The prompt's text with a card of Approve / Deny buttons; their parameters carry the approval id
        and this prompt's secret, checked on a click before the kit hears of it."""
        secret = self.kit.store.kv_get(f"approval_secret:{approval_id}") or secrets.token_urlsafe(24)
        self.kit.store.kv_set(f"approval_secret:{approval_id}", secret)

        def button(label: str, approve: bool) -> dict[str, Any]:
            return {"text": label, "on_click": {"action": {"function": APPROVAL_FUNCTION, "parameters": [
                {"key": "approval_id", "value": approval_id}, {"key": "approve", "value": str(approve).lower()},
                {"key": "secret", "value": secret}]}}}

        card = {"card_id": f"approval-{approval_id}"[:64], "card": {"sections": [{"widgets": [
            {"button_list": {"buttons": [button("Approve", True), button("Deny", False)]}}]}]}}
        return await self._create(target, {"text": str(text), "cards_v2": [card]}, "an approval prompt")


__all__ = ["GoogleChatAdapter"]
