"""SlackAdapter: Slack's protocol for the channel kit (docs/slack.md).

Events arrive over Socket Mode (default) or the Events API over HTTP; either way one handler
turns them into the kit's Incoming and returns only once ``kit.receive`` did, so Slack's
envelope (or HTTP request) is acknowledged only after the message is durable. Replies go out
with chat.postMessage in mrkdwn, threaded under the person's message in channels; the status
line is one message edited with chat.update (bots have no typing indicator on Slack);
approvals are Block Kit buttons whose presses come back as ``block_actions``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, ClassVar

import aiohttp
from pydantic import BaseModel, SecretStr
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from clawgate.channels.kit import (
    AdapterKit,
    Capabilities,
    ChannelAuthError,
    ChannelUnavailable,
    PlatformAdapter,
    Sender,
    Target,
)
from clawgate.channels.kit.commands import KIT_COMMANDS
from clawgate.channels.kit.markdown import split_markdown
from clawgate.channels.kit.probe import ProbeResult, http_status, logged_in, refused, unreachable
from clawgate.channels.slack.api import (
    AUTH_ERRORS,
    api_url,
    clients,
    delivery_error,
    download_private,
    slack_error,
    token_may_go_to,
)
from clawgate.channels.slack.events import message_incoming, slash_incoming
from clawgate.channels.slack.http import HttpReceiver
from clawgate.channels.slack.mrkdwn import no_pings, to_mrkdwn
from clawgate.channels.slack.settings import SlackSettings
from clawgate.channels.slack.socket import SocketReceiver

# chat.postMessage asks for text of at most 4,000 characters (longer is refused as msg_too_long
# well below the documented 40,000); a section block's text at most 3,000.
MAX_CHARS = 3_900
SPLIT_AT = 3_000
SECTION_TEXT = 3_000
APPROVE, DENY = "clawgate_approve", "clawgate_deny"
_NETWORK = (aiohttp.ClientError, asyncio.TimeoutError, OSError)


def _secret(value: SecretStr | None) -> str:
    return value.get_secret_value().strip() if value is not None else ""


class SlackAdapter(PlatformAdapter):
    name: ClassVar[str] = "slack"
    settings_model: ClassVar[type[SlackSettings]] = SlackSettings
    account_fields: ClassVar[tuple[str, ...]] = ("bot_token", "app_token", "mode")
    capabilities: ClassVar[Capabilities] = Capabilities(
        max_chars=MAX_CHARS, edit=True, typing=False, buttons=True, threads=True, native_commands=False,
        files=True, max_file_bytes=1024 * 1024 * 1024,  # Slack's per-file upload limit (1 GB)
        prompt_chars=SECTION_TEXT)  # a prompt's text is a section block's

    def __init__(self, settings: SlackSettings, kit: AdapterKit) -> None:  # type: ignore[override]
        super().__init__(settings, kit)
        self.settings: SlackSettings = settings
        # No connection is made before a call; connect() checks the token's shape first.
        self._send: AsyncWebClient
        self._lookup: AsyncWebClient
        self._send, self._lookup = clients(_secret(settings.bot_token), settings.base_url)
        self._receiver: SocketReceiver | HttpReceiver | None = None
        self.bot_user_id = ""
        self.bot_name: str | None = None
        self.team: str | None = None
        self.team_id: str | None = None
        self._users: dict[str, Sender] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- lifecycle --------------------------------------------------------------------------
    def _tokens(self) -> tuple[str, str]:
        return _tokens(self.settings)

    @classmethod
    async def probe(cls, settings: BaseModel) -> ProbeResult:
        """auth.test with the bot token (and, in Socket Mode, apps.connections.open with the app token:
        it only hands out a WebSocket address, nothing is opened), as connect() does."""
        assert isinstance(settings, SlackSettings)
        try:
            bot, app = _tokens(settings)
        except ChannelAuthError as exc:
            return ProbeResult("fail", str(exc).removeprefix("Slack: "))  # the line names its fix
        url = api_url(settings.base_url)
        client = AsyncWebClient(token=bot, base_url=url, timeout=30, retry_handlers=[])
        answers = []
        for setting, call, how in (
                ("bot_token", lambda: client.auth_test(), "the app's Bot User OAuth Token, xoxb-…"),
                ("app_token", lambda: client.apps_connections_open(app_token=app),
                 "an xapp- token with the connections:write scope")):
            if setting == "app_token" and settings.mode != "socket":
                break
            try:
                answers.append(await call())
            except SlackApiError as e:
                error, status = slack_error(e), e.response.status_code
                credential = f"[channels.slack] {setting} (CLAWGATE_CHANNELS__SLACK__{setting.upper()})"
                if error in AUTH_ERRORS:
                    return refused("Slack", f"{setting} ({error})", credential, how)
                return http_status("Slack", url, status, credential=credential, base_setting="channels.slack.base_url",
                                   how=how) or ProbeResult("warn", f"Slack answered {error}; not confirmed",
                                                           "try again later; see status.slack.com")
            except _NETWORK as e:
                return unreachable("Slack", url, str(e) or type(e).__name__, "channels.slack.base_url")
        auth = answers[0]
        return logged_in(f"logged in as {auth.get('user')} in {auth.get('team')} ({settings.mode} mode)")

    async def connect(self) -> None:
        _bot, app = self._tokens()
        s = self.settings
        try:
            auth = await self._lookup.auth_test()
        except SlackApiError as e:
            error = slack_error(e)
            if error in AUTH_ERRORS:
                raise ChannelAuthError(f"Slack refused the bot token ({error}): set [channels.slack] bot_token "
                                       "to the app's current Bot User OAuth Token (xoxb-…)") from None
            raise ChannelUnavailable(f"Slack auth.test failed: {error}") from None
        except _NETWORK as e:
            raise ChannelUnavailable(f"Slack unreachable at {api_url(s.base_url)}: {e or type(e).__name__}") from None
        self.bot_user_id = str(auth["user_id"])
        self.bot_name, self.team = auth.get("user"), auth.get("team")
        self.team_id = str(auth["team_id"]) if auth.get("team_id") else None
        if s.mode == "socket":
            receiver = SocketReceiver(app_token=app, api_url=api_url(s.base_url), handler=self._envelope,
                                      log=self.kit.log)
            self._receiver = receiver
            try:
                await receiver.connect()
            except SlackApiError as e:
                error = slack_error(e)
                if error in AUTH_ERRORS:
                    raise ChannelAuthError(f"Slack refused the app-level token ({error}): set [channels.slack] "
                                           "app_token to an xapp- token with the connections:write scope") from None
                raise ChannelUnavailable(f"Slack apps.connections.open failed: {error}") from None
            except (*_NETWORK, ConnectionError) as e:
                raise ChannelUnavailable(f"Slack Socket Mode unreachable: {e or type(e).__name__}") from None
        else:
            http = HttpReceiver(signing_secret=_secret(s.signing_secret), host=s.http_host, port=s.http_port,
                                path=s.http_path, handler=self._envelope, log=self.kit.log)
            self._receiver = http
            try:
                await http.start()
            except OSError as e:
                raise ChannelUnavailable(f"Slack events server cannot listen on {s.http_host}:{s.http_port}: "
                                         f"{e.strerror or e}") from None
        # the one line that says the channel is up, whichever way events arrive
        how = "Socket Mode" if s.mode == "socket" else f"events accepted at {self._receiver.url}"  # type: ignore[union-attr]
        self.kit.log.info("connected to Slack as %s in %s (%s)", self.bot_name, self.team, how)

    async def run(self) -> None:
        if isinstance(self._receiver, SocketReceiver):
            await self._receiver.lost(self.settings.lost_after_seconds)
            raise ChannelUnavailable(f"Slack Socket Mode connection lost for {self.settings.lost_after_seconds:g} s")
        await asyncio.Event().wait()

    async def disconnect(self) -> None:
        receiver, self._receiver = self._receiver, None
        if receiver is not None:
            await receiver.close()
        for task in list(self._tasks):
            task.cancel()

    def status(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"mode": self.settings.mode}
        if self.bot_name:
            facts["bot"] = f"@{self.bot_name}"
        if self.team:
            facts["team"] = self.team
        if isinstance(self._receiver, HttpReceiver):
            facts["url"] = self._receiver.url
        return facts

    # -- receiving --------------------------------------------------------------------------
    async def _envelope(self, kind: str, payload: dict[str, Any], retry_attempt: int) -> dict[str, Any] | None:
        """One Socket Mode envelope or HTTP request; returns the acknowledgement's payload."""
        if kind == "events_api" and payload.get("type") == "event_callback":
            await self._on_event(payload.get("event") or {}, team_id=payload.get("team_id"))
        elif kind == "interactive" and payload.get("type") == "block_actions":
            await self._on_actions(payload)
        elif kind == "slash_commands":
            return await self._on_slash(payload)
        return None

    async def _on_event(self, event: dict[str, Any], team_id: object = None) -> None:
        incoming = message_incoming(event, bot_user_id=self.bot_user_id, sender=None, fetch_file=self._fetch_file)
        if incoming is None:
            return
        if team := event.get("team") or team_id or self.team_id:  # the workspace, a scope bindings match on
            incoming.metadata["team_id"] = str(team)
        if incoming.addressed and not incoming.sender_is_bot:  # the kit reads nothing else: no lookup
            incoming = dataclasses.replace(incoming, sender=await self._sender(incoming.sender.user_id))
        await self.kit.receive(incoming)

    async def _sender(self, user_id: str, username: str | None = None) -> Sender:
        """The person behind a user id, with their handle (owner entries may name it); looked up once."""
        known = self._users.get(user_id)
        if known is not None:
            return known
        sender = Sender(user_id=user_id, username=username)
        try:
            user = (await self._lookup.users_info(user=user_id))["user"]
            profile = user.get("profile") or {}
            sender = Sender(user_id=user_id, username=user.get("name") or username,
                            display=profile.get("display_name") or user.get("real_name") or None)
            self._users[user_id] = sender
        except (SlackApiError, *_NETWORK) as e:
            self.kit.log.warning("Slack users.info %s failed: %s", user_id, e)
        return sender

    async def _fetch_file(self, file: dict[str, Any]) -> bytes:
        return await download_private(file, token=_secret(self.settings.bot_token), base_url=self.settings.base_url,
                                      lookup=self._lookup, limit=self.settings.max_file_bytes)

    async def _on_actions(self, payload: dict[str, Any]) -> None:
        user = payload.get("user") or {}
        for action in payload.get("actions") or []:
            if action.get("action_id") not in (APPROVE, DENY) or not user.get("id"):
                continue
            sender = Sender(user_id=str(user["id"]), username=user.get("username"))
            line = await self.kit.approval_answer(str(action.get("value") or ""), sender,
                                                  action.get("action_id") == APPROVE)
            url = str(payload.get("response_url") or "")
            if line and url and token_may_go_to(url, self.settings.base_url):
                self._spawn(self._respond(url, line))

    async def _respond(self, response_url: str, line: str) -> None:
        """The presser alone sees the answer (an ephemeral message through response_url)."""
        try:
            await AsyncWebhookClient(response_url).send(text=line, response_type="ephemeral", replace_original=False)
        except _NETWORK as e:
            self.kit.log.warning("Slack response_url post failed: %s", e)

    async def _on_slash(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        # `/approve ID` and `/deny ID` are in the set on every channel; Slack takes no typed `/approve`
        # (its composer reads it as an unknown slash command), so they come through this one too
        known = [*self.kit.command_names(), *KIT_COMMANDS]
        names = list(dict.fromkeys(name.lstrip("/").lower() for name, _ in known))
        words = str(payload.get("text") or "").split()
        if not words or words[0].lstrip("/").lower() not in names:
            return {"response_type": "ephemeral",
                    "text": f"Usage: {self.settings.slash_command} " + "|".join(names)}
        sender = await self._sender(str(payload.get("user_id") or ""), payload.get("user_name"))
        await self.kit.receive(slash_incoming(payload, sender=sender))
        return None

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- sending ----------------------------------------------------------------------------
    def render(self, markdown: str) -> list[str]:
        return [chunk for piece in split_markdown(markdown, SPLIT_AT) for chunk in self._fit(piece, SPLIT_AT)]

    def _fit(self, piece: str, limit: int) -> list[str]:
        """A piece whose mrkdwn outgrew the limit (escaping & < > lengthens text) is split smaller."""
        text = to_mrkdwn(piece)
        if len(text) <= MAX_CHARS:
            return [text] if text.strip() else []
        if limit <= 250:
            return [text[i:i + MAX_CHARS] for i in range(0, len(text), MAX_CHARS)]
        return [c for part in split_markdown(piece, limit // 2) for c in self._fit(part, limit // 2)]

    async def send_text(self, target: Target, text: str) -> str:
        try:
            resp = await self._send.chat_postMessage(channel=target.chat_id, text=no_pings(text),
                                                     thread_ts=target.thread_id, unfurl_links=False,
                                                     unfurl_media=False)
        except (SlackApiError, *_NETWORK) as e:
            raise delivery_error(e, "chat.postMessage") from None
        return str(resp["ts"])

    async def send_file(self, target: Target, name: str, data: bytes, caption: str) -> str:
        """files_upload_v2: the upload URL, the bytes, then completeUploadExternal shares it in the chat."""
        try:
            resp = await self._send.files_upload_v2(channel=target.chat_id, file=data, filename=name, title=name,
                                                    initial_comment=no_pings(caption) or None,
                                                    thread_ts=target.thread_id)
        except (SlackApiError, *_NETWORK) as e:
            raise delivery_error(e, "files.completeUploadExternal") from None
        files = resp.get("files") or [{}]
        return str(files[0].get("id") or "")

    async def edit_text(self, target: Target, message_id: str, text: str) -> None:
        try:
            await self._send.chat_update(channel=target.chat_id, ts=message_id, text=no_pings(text), blocks=[])
        except (SlackApiError, *_NETWORK) as e:
            raise delivery_error(e, "chat.update") from None

    async def delete(self, target: Target, message_id: str) -> None:
        try:
            await self._send.chat_delete(channel=target.chat_id, ts=message_id)
        except (SlackApiError, *_NETWORK) as e:
            raise delivery_error(e, "chat.delete") from None

    async def send_approval(self, target: Target, approval_id: str, text: str) -> str | None:
        """``text`` is already rendered (a chunk of render()) and fits a section (capabilities.prompt_chars);
        were it longer, it goes on in further sections rather than being cut."""
        body = no_pings(text)
        sections = [{"type": "section", "block_id": f"clawgate_approval_text{i // SECTION_TEXT or ''}",
                     "text": {"type": "mrkdwn", "text": body[i:i + SECTION_TEXT]}}
                    for i in range(0, max(len(body), 1), SECTION_TEXT)]
        blocks = [
            *sections,
            {"type": "actions", "block_id": "clawgate_approval", "elements": [
                {"type": "button", "action_id": APPROVE, "style": "primary", "value": approval_id,
                 "text": {"type": "plain_text", "text": "Approve"}},
                {"type": "button", "action_id": DENY, "style": "danger", "value": approval_id,
                 "text": {"type": "plain_text", "text": "Deny"}}]},
        ]
        try:
            resp = await self._send.chat_postMessage(channel=target.chat_id, text=body[:MAX_CHARS], blocks=blocks,
                                                     thread_ts=target.thread_id)
        except (SlackApiError, *_NETWORK) as e:
            raise delivery_error(e, "chat.postMessage") from None
        return str(resp["ts"])


def _tokens(s: SlackSettings) -> tuple[str, str]:
    """The bot token and (Socket Mode) the app token, checked for shape: one line naming the fix."""
    bot = _secret(s.bot_token)
    if not bot.startswith("xoxb-"):
        problem = "is not set" if not bot else "is not a bot token (xoxb-…)"
        raise ChannelAuthError(f"Slack: [channels.slack] bot_token {problem}: copy the Bot User OAuth Token "
                               "from the app's OAuth & Permissions page (or set CLAWGATE_CHANNELS__SLACK__BOT_TOKEN)")
    app = _secret(s.app_token)
    if s.mode == "socket" and not app.startswith("xapp-"):
        problem = "is not set" if not app else "is not an app-level token (xapp-…)"
        raise ChannelAuthError(f"Slack: [channels.slack] app_token {problem}: create one with the "
                               "connections:write scope under Basic Information → App-Level Tokens, "
                               "or set mode = \"http\"")
    if s.mode == "http" and not _secret(s.signing_secret):
        raise ChannelAuthError("Slack: mode = \"http\" needs [channels.slack] signing_secret: copy the "
                               "Signing Secret from the app's Basic Information page")
    return bot, app


__all__ = ["SlackAdapter"]
