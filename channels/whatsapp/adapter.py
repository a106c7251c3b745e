"""WhatsAppAdapter: the WhatsApp Business Platform's Cloud API for the channel kit (docs/whatsapp.md).

Messages arrive as Meta's signed webhooks (webhook.py) and are answered 200 only once `kit.receive`
returned, so an update not yet durable is delivered again by Meta and answered once. Replies go out
through the Graph API (`POST /{version}/{phone-number-id}/messages`), quoting the message they answer
(`context.message_id`), in WhatsApp's own formatting (format.py), at most 4,096 characters each.
While the agent works the person's last message is marked read with the typing indicator. Approvals
are interactive reply buttons. The 24-hour customer-service window is respected (window.py). The
Graph API is asked every `check_seconds` whether it still answers: a webhook receiver hears nothing
when Meta is unreachable, and the kit should show that as retrying.
"""

from __future__ import annotations

import asyncio
import mimetypes
import time
from typing import Any, Callable, ClassVar

from pydantic import BaseModel, SecretStr

from clawgate.channels.kit import (
    AdapterKit,
    Capabilities,
    ChannelAuthError,
    ChannelUnavailable,
    DeliveryError,
    PlatformAdapter,
    Sender,
    Target,
    Unconfirmed,
)
from clawgate.channels.kit.probe import ProbeResult, logged_in, refused, unreachable, wrong_base_url
from clawgate.channels.whatsapp.events import button_id, incoming_of, press_of
from clawgate.channels.whatsapp.format import MAX_CHARS, MAX_FILE_BYTES, render_chunks
from clawgate.channels.whatsapp.graph import NETWORK, WINDOW_CODES, Graph, GraphError, delivery_error
from clawgate.channels.whatsapp.settings import WhatsAppSettings
from clawgate.channels.whatsapp.webhook import WebhookReceiver
from clawgate.channels.whatsapp.window import ServiceWindow

BODY_CHARS = 1024  # an interactive message's body


def _secret(value: SecretStr | None) -> str:
    return value.get_secret_value().strip() if value is not None else ""


def _credentials(s: WhatsAppSettings) -> tuple[str, str, str]:
    """(token, app secret, verify token), or one line naming the setting that is missing."""
    missing = [(name, how) for name, value, how in (
        ("access_token", _secret(s.access_token), "a System User token with whatsapp_business_messaging"),
        ("phone_number_id", s.phone_number_id, "the id shown under WhatsApp Manager → API Setup"),
        ("app_secret", _secret(s.app_secret), "the app's App Secret (App settings → Basic)"),
        ("verify_token", _secret(s.verify_token), "any long random text, typed again in the app's webhook settings"),
    ) if not value]
    if missing:
        name, how = missing[0]
        raise ChannelAuthError(f"WhatsApp: [channels.whatsapp] {name} is not set: {how} "
                               f"(or CLAWGATE_CHANNELS__WHATSAPP__{name.upper()})")
    return _secret(s.access_token), _secret(s.app_secret), _secret(s.verify_token)


def _graph(s: WhatsAppSettings) -> Graph:
    return Graph(token=_secret(s.access_token), base_url=s.base_url, version=s.api_version,
                 phone_number_id=s.phone_number_id)


class WhatsAppAdapter(PlatformAdapter):
    name: ClassVar[str] = "whatsapp"
    settings_model: ClassVar[type[WhatsAppSettings]] = WhatsAppSettings
    account_fields: ClassVar[tuple[str, ...]] = ("mode", "phone_number_id")
    capabilities: ClassVar[Capabilities] = Capabilities(
        max_chars=MAX_CHARS, typing=True, buttons=True, files=True, max_file_bytes=MAX_FILE_BYTES,
        prompt_chars=BODY_CHARS)

    @staticmethod
    def session_per_account(settings: BaseModel) -> bool:
        """A linked device is its account's own session (state/whatsapp/<account>/): two accounts never share one."""
        return getattr(settings, "mode", "cloud") == "linked"

    def __new__(cls, settings: WhatsAppSettings, kit: AdapterKit) -> Any:
        """`mode = "linked"` is another transport on the same section (linked.py): the entry point builds it."""
        if cls is WhatsAppAdapter and settings.mode == "linked":
            from clawgate.channels.whatsapp.linked import LinkedAdapter

            return LinkedAdapter(settings, kit)
        return super().__new__(cls)

    def __init__(self, settings: WhatsAppSettings, kit: AdapterKit) -> None:  # type: ignore[override]
        super().__init__(settings, kit)
        self.settings: WhatsAppSettings = settings
        self._graph = _graph(settings)
        self._receiver: WebhookReceiver | None = None
        self._window = ServiceWindow(kit.store, kit.log)
        self._last_in: dict[str, str] = {}  # chat -> the person's latest message id (read + typing names it)
        self._prompt_chats: dict[str, str] = {}  # approval prompt's wamid -> the chat it was sent to
        self.number: str | None = None

    # -- lifecycle --------------------------------------------------------------------------
    @classmethod
    def link_check(cls, settings: BaseModel, phone: str | None = None) -> None:
        """Refuse, before anything connects, a link that cannot work (a gateway client is answered at once):
        an account not in linked mode, or a number that is not one (login.py's E.164 check)."""
        assert isinstance(settings, WhatsAppSettings)
        if settings.mode != "linked":
            raise ChannelAuthError("WhatsApp: only mode = \"linked\" links a device; the Cloud API is set up with "
                                   "its token in [channels.whatsapp] (docs/whatsapp.md)")
        if phone is not None:
            from clawgate.channels.whatsapp.login import phone_digits

            phone_digits(phone)

    @classmethod
    async def login(cls, settings: BaseModel, show: Callable[[str], None], account: str = "default",
                    phone: str | None = None, qr: Callable[[str], None] | None = None,
                    pairing: Callable[[str], None] | None = None) -> str:
        """Link clawgate as a device of a WhatsApp account (linked mode; login.py). `qr` takes each code as
        text (a gateway client draws it) instead of the terminal QR code in `show`; with `phone`, `pairing`
        takes the pairing code WhatsApp gives for that number instead of a line in `show`."""
        assert isinstance(settings, WhatsAppSettings)
        cls.link_check(settings, phone)
        from clawgate.channels.whatsapp.login import link

        return await link(show, account, phone, qr, pairing, wait_seconds=settings.link_wait_seconds)

    @classmethod
    async def probe(cls, settings: BaseModel, account: str = "default") -> ProbeResult:
        """Cloud: GET the business phone number with the token, as connect() does; nothing is sent.
        Linked: the session database says whether the device is linked (linked.py)."""
        assert isinstance(settings, WhatsAppSettings)
        if settings.mode == "linked":
            from clawgate.channels.whatsapp.linked import LinkedAdapter

            return await LinkedAdapter.probe(settings, account)
        try:
            _credentials(settings)
        except ChannelAuthError as exc:
            return ProbeResult("fail", str(exc).removeprefix("WhatsApp: "))
        graph = _graph(settings)
        try:
            number = await graph.phone_number()
        except GraphError as e:
            if e.auth:
                return refused("WhatsApp", f"access token: {e}", "[channels.whatsapp] access_token",
                               "a System User token with whatsapp_business_messaging")
            if e.no_such_object:
                return refused("WhatsApp", f"phone number id: {e}", "[channels.whatsapp] phone_number_id",
                               "the id under WhatsApp Manager → API Setup, not the number")
            if e.code == -1 and e.status in (404, 405):
                return wrong_base_url("WhatsApp", graph.base, e.status, "channels.whatsapp.base_url")
            return ProbeResult("warn", f"the Graph API answered {e}; not confirmed", "try again later")
        except NETWORK as e:
            return unreachable("WhatsApp", graph.base, str(e) or type(e).__name__, "channels.whatsapp.base_url")
        finally:
            await graph.close()
        return logged_in(f"Cloud API number {number.get('display_phone_number')} ({number.get('verified_name')})")

    async def connect(self) -> None:
        _token, app_secret, verify_token = _credentials(self.settings)
        s = self.settings
        number = await self._check()
        self.number = f"{number.get('display_phone_number') or s.phone_number_id}"
        receiver = WebhookReceiver(app_secret=app_secret, verify_token=verify_token, host=s.webhook_host,
                                   port=s.webhook_port, path=s.webhook_path, handler=self._on_payload,
                                   log=self.kit.log)
        try:
            await receiver.start()
        except OSError as e:
            raise ChannelUnavailable(f"WhatsApp webhook listener cannot listen on {s.webhook_host}:{s.webhook_port}: "
                                     f"{e.strerror or e}") from None
        self._receiver = receiver
        self.kit.log.info("connected to WhatsApp Cloud API as %s (%s); webhooks accepted at %s", self.number,
                          number.get("verified_name"), receiver.url)

    async def _check(self) -> dict[str, Any]:
        """The number's details: a token or id Meta refuses is one line (not retried), an outage is retried."""
        try:
            return await self._graph.phone_number()
        except GraphError as e:
            if e.auth:
                raise ChannelAuthError(f"WhatsApp refused the access token {e}: set [channels.whatsapp] "
                                       "access_token to a valid System User token") from None
            if e.no_such_object:
                raise ChannelAuthError(f"WhatsApp has no phone number {self.settings.phone_number_id!r} for this "
                                       "token: set [channels.whatsapp] phone_number_id to the id under "
                                       "WhatsApp Manager → API Setup") from None
            raise ChannelUnavailable(f"WhatsApp Graph API answered {e}") from None
        except NETWORK as e:
            raise ChannelUnavailable(f"WhatsApp Graph API unreachable at {self._graph.base}: "
                                     f"{e or type(e).__name__}") from None

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.settings.check_seconds)
            await self._check()

    async def disconnect(self) -> None:
        receiver, self._receiver = self._receiver, None
        if receiver is not None:
            await receiver.close()
        await self._graph.close()

    def status(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"mode": self.settings.mode}
        if self.number:
            facts["bot"] = self.number
        if self._receiver is not None:
            facts["url"] = self._receiver.url
        notice = self._window.notice()
        if notice:
            facts["notice"] = notice
        return facts

    # -- receiving --------------------------------------------------------------------------
    async def _on_payload(self, payload: dict[str, Any]) -> None:
        for entry in payload.get("entry") or []:
            for change in entry.get("changes") or []:
                value = change.get("value") or {}
                if change.get("field") != "messages":
                    continue
                if str((value.get("metadata") or {}).get("phone_number_id") or "") != self.settings.phone_number_id:
                    continue  # another number of the same app: its own account answers it
                names = {str(c.get("wa_id")): (c.get("profile") or {}).get("name") for c in value.get("contacts") or []}
                for message in value.get("messages") or []:
                    await self._on_message(message, names)
                for status in value.get("statuses") or []:
                    self._on_status(status)

    async def _on_message(self, message: dict[str, Any], names: dict[str, Any]) -> None:
        wa_id = str(message.get("from") or "")
        if not wa_id.isdigit():
            return
        sender = Sender(user_id=wa_id, username=None, display=names.get(wa_id) or None)
        try:
            self._window.wrote(wa_id, float(message.get("timestamp") or time.time()))
        except ValueError:
            self._window.wrote(wa_id, time.time())
        if message.get("id"):
            self._last_in[wa_id] = str(message["id"])
        press = press_of(message, sender)
        if press is not None:
            # the chat the pressed prompt is in, named by the reply's context (Meta signs it); the kit checks
            # the prompt is pending there and that the presser is an owner
            context = str((message.get("context") or {}).get("id") or "")
            chat = self._prompt_chats.get(context, press.chat_id)
            line = await self.kit.approval_answer(press.approval_id, sender, press.approved, chat_id=chat)
            if line:  # in the background: the webhook's answer to Meta waits for no send
                self.kit.spawn(self._tell_presser(press.chat_id, line, press.message_id or None))
            return
        incoming = incoming_of(message, sender, self._fetch)
        if incoming is not None:
            await self.kit.receive(incoming)

    async def _tell_presser(self, chat_id: str, line: str, reply_to: str | None) -> None:
        """The kit's answer to a button press, as written (escaped: it may quote a request's words), on the
        press itself; a send that fails is logged, as the kit's own control lines are."""
        try:
            for index, chunk in enumerate(self.render(self.kit.markdown.escape(line))):
                await self.send_text(Target(chat_id, None, None if index else reply_to), chunk)
        except (DeliveryError, Unconfirmed) as e:
            self.kit.log.warning("WhatsApp: the answer to a button press was not sent: %s", e)

    def _on_status(self, status: dict[str, Any]) -> None:
        """A sent message that failed later (Meta reports some errors only here): the window is one."""
        if status.get("status") != "failed":
            return
        for error in status.get("errors") or []:
            if error.get("code") in WINDOW_CODES:
                self._window.shut(str(status.get("recipient_id") or ""), f"Meta refused it ({error.get('code')})")
            else:
                self.kit.log.warning("WhatsApp message %s to %s failed: (%s) %s", status.get("id"),
                                     status.get("recipient_id"), error.get("code"), error.get("title"))

    async def _fetch(self, media_id: str, size: int | None) -> bytes:
        return await self._graph.download(media_id, self.settings.max_file_bytes)

    # -- sending ----------------------------------------------------------------------------
    def render(self, markdown: str) -> list[str]:
        return render_chunks(markdown)

    def _open(self, chat_id: str) -> None:
        why = self._window.refusal(chat_id)
        if why is not None:
            raise DeliveryError(f"WhatsApp: not sent: {why}", permanent=True)

    async def _send(self, target: Target, payload: dict[str, Any], what: str) -> str:
        self._open(target.chat_id)
        if target.reply_to:
            payload = {**payload, "context": {"message_id": target.reply_to}}
        try:
            return await self._graph.send({"to": target.chat_id, **payload})
        except (GraphError, *NETWORK) as e:
            if isinstance(e, GraphError) and e.code in WINDOW_CODES:
                self._window.shut(target.chat_id, f"Meta refused it ({e})")
            raise delivery_error(e, what, rate_wait=self.settings.rate_limit_retry_seconds) from None

    async def send_text(self, target: Target, text: str) -> str:
        return await self._send(target, {"type": "text", "text": {"body": text, "preview_url": False}}, "a message")

    async def send_approval(self, target: Target, approval_id: str, text: str) -> str | None:
        if len(text) > BODY_CHARS:
            raise DeliveryError("WhatsApp: an interactive message's body holds 1,024 characters", permanent=True,
                                too_large=True)
        buttons = [{"type": "reply", "reply": {"id": button_id(approval_id, ok), "title": title}}
                   for ok, title in ((True, "Approve"), (False, "Deny"))]
        payload = {"type": "interactive", "interactive": {"type": "button", "body": {"text": text},
                                                          "action": {"buttons": buttons}}}
        message_id = await self._send(target, payload, "an approval prompt")
        self._prompt_chats[message_id] = target.chat_id
        return message_id

    async def send_file(self, target: Target, name: str, data: bytes, caption: str) -> str:
        self._open(target.chat_id)
        mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
        try:
            media_id = await self._graph.upload(name, data, mime)
        except (GraphError, *NETWORK) as e:
            raise delivery_error(e, "a media upload", rate_wait=self.settings.rate_limit_retry_seconds) from None
        document: dict[str, Any] = {"id": media_id, "filename": name}
        if caption:
            document["caption"] = caption[:BODY_CHARS]
        return await self._send(target, {"type": "document", "document": document}, "a document")

    async def typing(self, target: Target) -> None:
        """Read ticks and "typing…" on the person's latest message (Meta shows it up to 25 s or until we answer)."""
        message_id = self._last_in.get(target.chat_id)
        if not message_id or self.settings.read_receipts is False or self._window.closed.get(target.chat_id):
            return
        try:
            await self._graph.read_and_typing(message_id, typing=True)
        except (GraphError, *NETWORK) as e:
            self.kit.log.debug("WhatsApp typing indicator failed: %s", e)


__all__ = ["WhatsAppAdapter"]
