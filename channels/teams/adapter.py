"""TeamsAdapter: Microsoft Teams through an Azure Bot (the Bot Framework protocol) for the channel kit (docs/teams.md).

Activities arrive as POSTs to the messaging endpoint (listener.py), each with the Bot Connector's signed
JWT (auth.py), and are answered 200 only once `kit.receive` returned. Replies go to the activity's
serviceUrl through the Agents SDK's ConnectorClient with a client-credentials token (connector.py), as
HTML Teams renders (render.py), at most 4,000 characters each; the status line is edited in place (PUT
activity), typing is a typing activity, approvals are Adaptive Cards with Approve / Deny. The OpenID
metadata is fetched again every `check_seconds`: new signing keys, and an outage shown as retrying (a
listener alone hears nothing when Microsoft is unreachable).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
from typing import Any, ClassVar

import aiohttp
from microsoft_agents.activity import Activity, Attachment
from pydantic import BaseModel

from clawgate.channels.kit import (
    AdapterKit,
    Capabilities,
    ChannelAuthError,
    ChannelUnavailable,
    DeliveryError,
    PlatformAdapter,
    Sender,
    Target,
)
from clawgate.channels.kit.markdown import escape
from clawgate.channels.kit.probe import ProbeResult, logged_in, refused, unreachable, wrong_base_url
from clawgate.channels.teams.auth import NETWORK, InboundAuth, ServiceError, TokenClient, TokenRefused
from clawgate.channels.teams.connector import Connectors, ServiceUrls, delivery_error, resource_id
from clawgate.channels.teams.events import incoming_of, join_conversation, press_of, sender_of, split_conversation
from clawgate.channels.teams.listener import ActivityListener
from clawgate.channels.teams.render import CARD_TYPE, MAX_CHARS, approval_card, render_chunks
from clawgate.channels.teams.settings import TeamsSettings

PROMPT_CHARS = 3500  # a prompt's HTML above its card
SDK_LOGGER = "microsoft_agents"  # the SDK logs every send at INFO: the kit already logs what matters


def _credentials(s: TeamsSettings) -> tuple[str, str]:
    secret = s.app_password.get_secret_value().strip() if s.app_password is not None else ""
    if not s.app_id.strip():
        raise ChannelAuthError("Teams: [channels.teams] app_id is not set: the Azure Bot's Microsoft App ID "
                               "(or CLAWGATE_CHANNELS__TEAMS__APP_ID)")
    if not secret:
        raise ChannelAuthError("Teams: [channels.teams] app_password is not set: a client secret of the bot's app "
                               "registration (or CLAWGATE_CHANNELS__TEAMS__APP_PASSWORD)")
    return s.app_id.strip(), secret


def _session(s: TeamsSettings) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=s.request_timeout_seconds))


def _tokens(s: TeamsSettings, session: aiohttp.ClientSession) -> TokenClient:
    app_id, secret = _credentials(s)
    return TokenClient(session, url=s.token_endpoint(), app_id=app_id, secret=secret, scope=s.token_scope)


class TeamsAdapter(PlatformAdapter):
    name: ClassVar[str] = "teams"
    settings_model: ClassVar[type[TeamsSettings]] = TeamsSettings
    account_fields: ClassVar[tuple[str, ...]] = ("app_id",)
    # plain HTTPS both ways: in a fleet every process listens (activities taken in are durable and
    # deduplicated fleet-wide) and sends its own replies; no connection to hold (docs/fleet.md)
    exclusive_connection: ClassVar[bool] = False
    capabilities: ClassVar[Capabilities] = Capabilities(
        max_chars=MAX_CHARS, edit=True, typing=True, buttons=True, threads=True, prompt_chars=PROMPT_CHARS)

    @staticmethod
    def split_chat(rest: str) -> tuple[str, str | None] | None:
        """`19:x@thread.tacv2` or `19:x@thread.tacv2:<root message id>`: conversation ids hold ':' themselves
        (`a:1…`, `19:…`), a thread is the channel post's numeric id after the last one."""
        head, sep, tail = rest.rpartition(":")
        if sep and ":" in head and tail.isdigit():
            return head, tail
        return (rest, None) if rest else None

    def __init__(self, settings: TeamsSettings, kit: AdapterKit) -> None:  # type: ignore[override]
        super().__init__(settings, kit)
        self.settings: TeamsSettings = settings
        self._session: aiohttp.ClientSession | None = None
        self._auth: InboundAuth | None = None
        self._tokens: TokenClient | None = None
        self._connectors: Connectors | None = None
        self._listener: ActivityListener | None = None
        self._urls = ServiceUrls(kit.store)

    # -- lifecycle --------------------------------------------------------------------------
    @classmethod
    async def probe(cls, settings: BaseModel) -> ProbeResult:
        """A client-credentials token and the OpenID metadata's signing keys, as connect() gets them; nothing sent."""
        assert isinstance(settings, TeamsSettings)
        try:
            _credentials(settings)
        except ChannelAuthError as exc:
            return ProbeResult("fail", str(exc).removeprefix("Teams: "))
        async with _session(settings) as session:
            try:
                await _tokens(settings, session).token()
            except TokenRefused as e:
                return refused("Teams", f"app credentials: {e}", "[channels.teams] app_id / app_password",
                               "the Azure Bot's Microsoft App ID and a client secret of its app registration")
            except ServiceError as e:
                if e.status in (404, 405):
                    return wrong_base_url("Microsoft's token service", settings.token_endpoint(), e.status,
                                          "channels.teams.token_url")
                return ProbeResult("warn", f"the token service answered {e}; not confirmed", "try again later")
            except NETWORK as e:
                return unreachable("Microsoft's token service", settings.token_endpoint(),
                                   str(e) or type(e).__name__, "channels.teams.token_url")
            auth = InboundAuth(session, metadata_url=settings.openid_metadata_url, issuer=settings.issuer,
                               app_id=settings.app_id)
            try:
                keys = await auth.refresh()
            except ServiceError as e:
                return ProbeResult("fail", f"the OpenID metadata: {e}", "check channels.teams.openid_metadata_url")
            except NETWORK as e:
                return unreachable("the Bot Framework's OpenID metadata", settings.openid_metadata_url,
                                   str(e) or type(e).__name__, "channels.teams.openid_metadata_url")
        return logged_in(f"app {settings.app_id} (token issued; {keys} signing keys)")

    async def connect(self) -> None:
        s = self.settings
        logging.getLogger(SDK_LOGGER).setLevel(logging.WARNING)
        self._session = _session(s)
        self._tokens = _tokens(s, self._session)
        self._auth = InboundAuth(self._session, metadata_url=s.openid_metadata_url, issuer=s.issuer,
                                 app_id=s.app_id.strip())
        try:
            await self._tokens.token()
            await self._auth.refresh()
        except TokenRefused as e:
            raise ChannelAuthError(f"Teams: {e}: set [channels.teams] app_id to the Azure Bot's Microsoft App ID "
                                   "and app_password to a current client secret of its app registration") from None
        except ServiceError as e:
            raise ChannelUnavailable(f"Teams: {e}") from None
        except NETWORK as e:
            raise ChannelUnavailable(f"Teams: Microsoft's endpoints unreachable ({e or type(e).__name__})") from None
        self._connectors = Connectors(self._tokens, s.request_timeout_seconds)
        listener = ActivityListener(host=s.listen_host, port=s.listen_port, path=s.path, auth=self._auth,
                                    handler=self._on_activity, log=self.kit.log, reuse_port=self.kit.in_fleet)
        try:
            await listener.start()
        except OSError as e:
            raise ChannelUnavailable(f"Teams listener cannot listen on {s.listen_host}:{s.listen_port}: "
                                     f"{e.strerror or e}") from None
        self._listener = listener
        self.kit.log.info("Teams bot %s ready; activities accepted at %s", s.app_id, listener.url)

    async def run(self) -> None:
        assert self._auth is not None
        while True:
            await asyncio.sleep(self.settings.check_seconds)
            try:
                await self._auth.refresh()
            except (ServiceError, *NETWORK) as e:
                raise ChannelUnavailable(f"Teams: the OpenID metadata cannot be fetched ({e or type(e).__name__})") \
                    from None

    async def disconnect(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.close()
        connectors, self._connectors = self._connectors, None
        if connectors is not None:
            await connectors.close()
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def status(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"bot": self.settings.app_id}
        if self._listener is not None:
            facts["url"] = self._listener.url
        return facts

    # -- receiving --------------------------------------------------------------------------
    async def _on_activity(self, activity: Activity, claims: dict[str, Any]) -> None:
        """A verified activity: its serviceUrl is now one replies may go to, for its conversation."""
        conversation = str(activity.conversation.id if activity.conversation else "")
        if not conversation or not activity.service_url:
            return
        chat, _thread = split_conversation(conversation)
        self._urls.record(chat, activity.service_url)
        sender = sender_of(activity)
        if sender is None or activity.type != "message":
            return
        press = press_of(activity, sender)
        if press is not None:
            await self._pressed(press.approval_id, press.approved, press.secret, sender, press.chat_id,
                                press.thread_id, press.message_id)
            return
        bot_id = str(activity.recipient.id if activity.recipient else "")
        incoming = incoming_of(activity, sender, bot_id)
        if incoming is not None:
            await self.kit.receive(incoming)

    async def _pressed(self, approval_id: str, approved: bool, secret: str, sender: Sender, chat: str,
                       thread: str | None, message_id: str) -> None:
        """A card's button: counts only with the prompt's own secret, in the chat the prompt was sent to; the
        kit then admits only an owner's answer. The line it returns is the presser's answer."""
        expected = self.kit.store.kv_get(f"approval_secret:{approval_id}")
        sent_to = self.kit.store.kv_get(f"approval_chat:{approval_id}")
        if not expected or not hmac.compare_digest(expected.encode(), secret.encode()) or sent_to != chat:
            self.kit.log.warning("Teams: a press on approval %s without its prompt's secret, ignored", approval_id)
            return
        line = await self.kit.approval_answer(approval_id, sender, approved, chat_id=chat)
        if line:
            try:
                for chunk in self.render(escape(line)):
                    await self.send_text(Target(chat, thread, reply_to=message_id or None), chunk)
            except DeliveryError as e:
                self.kit.log.warning("Teams: the answer to a press was not sent: %s", e)

    # -- sending ----------------------------------------------------------------------------
    def render(self, markdown: str) -> list[str]:
        return render_chunks(markdown)

    async def _call(self, target: Target, what: str, body: Activity, *, edit: str | None = None,
                    delete: str | None = None) -> str:
        service_url = self._urls.of(target.chat_id)
        if service_url is None:
            raise DeliveryError(f"Teams: no verified activity ever came from conversation {target.chat_id}: "
                                "the bot can only answer where it was written to", permanent=True)
        if self._connectors is None:
            raise DeliveryError("Teams: the channel is not connected")
        conversation = join_conversation(target.chat_id, target.thread_id)
        try:
            client = await self._connectors.client(service_url)
            conversations = client.conversations
            if delete is not None:
                await conversations.delete_activity(conversation, delete)
                return delete
            if edit is not None:
                return resource_id(await conversations.update_activity(conversation, edit, body)) or edit
            if target.reply_to:
                return resource_id(await conversations.reply_to_activity(conversation, target.reply_to, body))
            return resource_id(await conversations.send_to_conversation(conversation, body))
        except (aiohttp.ClientResponseError, TokenRefused, ServiceError, *NETWORK) as e:
            if isinstance(e, aiohttp.ClientResponseError) and e.status == 401 and self._tokens is not None:
                self._tokens.forget()  # revoked or rolled: the next attempt fetches a new token
            raise delivery_error(e, what) from None

    @staticmethod
    def _message(text: str) -> Activity:
        return Activity(type="message", text=str(text), text_format="xml")

    async def send_text(self, target: Target, text: str) -> str:
        return await self._call(target, "a message", self._message(text))

    async def edit_text(self, target: Target, message_id: str, text: str) -> None:
        body = self._message(text)
        body.id = message_id
        await self._call(Target(target.chat_id, target.thread_id), "an edit", body, edit=message_id)

    async def delete(self, target: Target, message_id: str) -> None:
        await self._call(Target(target.chat_id, target.thread_id), "a deletion", self._message(""), delete=message_id)

    async def typing(self, target: Target) -> None:
        try:
            await self._call(Target(target.chat_id, target.thread_id), "typing", Activity(type="typing"))
        except DeliveryError as e:
            self.kit.log.debug("Teams typing activity failed: %s", e)

    async def send_approval(self, target: Target, approval_id: str, text: str) -> str | None:
        secret = self.kit.store.kv_get(f"approval_secret:{approval_id}") or secrets.token_urlsafe(24)
        self.kit.store.kv_set(f"approval_secret:{approval_id}", secret)
        self.kit.store.kv_set(f"approval_chat:{approval_id}", target.chat_id)
        body = self._message(text)
        body.attachments = [Attachment(content_type=CARD_TYPE, content=approval_card(approval_id, secret))]
        return await self._call(target, "an approval prompt", body)


__all__ = ["TeamsAdapter"]
