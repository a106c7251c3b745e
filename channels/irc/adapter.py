"""IrcAdapter: a bot nick on an IRC network for the channel kit (docs/irc.md).

Who wrote is the server's word, not the nick: with the `account-tag` capability every message carries
the services account its sender is logged in to (`account=alice`), and that account is the sender's id.
A sender without one is a stranger whatever nick they use (`~nick`): they may talk to an `open` bot
but never pair, never match `owner` or `allow_from`, never approve. A private message is a DM (its chat
is the account: `alice`); a channel message is read only when it starts with the bot's nick
(`clawgate: text` or `clawgate, text`). CTCP requests never reach the agent (VERSION is answered).
IRC has no message ids: the `msgid` tag is the dedupe key where the server gives one; without it each
line gets a fresh id, so a line lost in a crash before the kit took it is lost (at most once).
"""

from __future__ import annotations

import asyncio
import ssl
import uuid
from typing import Any, ClassVar

from pydantic import BaseModel

from clawgate.channels.irc.client import AuthRefused, IrcConnection, Lost
from clawgate.channels.irc.protocol import (UNKNOWN_PREFIX_TAIL, Message, addressed_text, casefold, ctcp, line,
                                           split_bytes, text_budget)
from clawgate.channels.irc.render import MAX_CHARS, line_bytes, render
from clawgate.channels.irc.settings import IrcSettings
from clawgate.channels.kit import (
    Capabilities,
    ChannelAuthError,
    ChannelKit,
    ChannelUnavailable,
    DeliveryError,
    Incoming,
    PlatformAdapter,
    Sender,
    Target,
    Unconfirmed,
)
from clawgate.channels.kit.commands import KIT_COMMANDS
from clawgate.channels.kit.probe import ProbeResult, logged_in

UNAUTHENTICATED = "~"  # the id prefix of a sender the server vouches for no account of
NOT_LOGGED_IN = ("This bot knows people by their services account, and you are not logged in to one: "
                 "identify to NickServ (or connect with SASL) and write again.")
VERSION_REPLY = "clawgate"
_UNSENDABLE = str.maketrans({"\r": " ", "\0": None, "\x01": None})


class IrcAdapter(PlatformAdapter):
    name: ClassVar[str] = "irc"
    settings_model: ClassVar[type[IrcSettings]] = IrcSettings
    account_fields: ClassVar[tuple[str, ...]] = ("host", "port", "nick")
    capabilities: ClassVar[Capabilities] = Capabilities(max_chars=MAX_CHARS, dm_is_user_id=True)

    def owner_chat(self, owner: str) -> str | None:
        """An owner is a services account, and an account is its private chat's id (sent to the nick it last
        wrote from, else the account's name as a nick); never a nick without an account."""
        return None if not owner or owner.startswith(UNAUTHENTICATED) else casefold(owner)

    def __init__(self, settings: IrcSettings, kit: ChannelKit) -> None:  # type: ignore[override]
        super().__init__(settings, kit)
        self.settings: IrcSettings = settings
        self.connection: IrcConnection | None = None
        self.nick_of: dict[str, str] = {}  # account -> the nick it last wrote from (where its DMs go)
        self.told: set[str] = set()  # unauthenticated nicks told to log in, once per connection
        self.refused_channels: list[str] = []

    # -- lifecycle ----------------------------------------------------------------------------
    @classmethod
    async def probe(cls, settings: BaseModel) -> ProbeResult:
        """Connect, register and log in as the daemon would, then QUIT: says as which nick and account."""
        assert isinstance(settings, IrcSettings)
        connection = _connection(settings, None)
        try:
            await _log_in(connection, settings)
        except ChannelAuthError as exc:
            return ProbeResult("fail", str(exc), _fix(settings))
        except ChannelUnavailable as exc:
            return ProbeResult("warn", str(exc), "check host, port and tls in [channels.irc]; the daemon retries")
        finally:
            await connection.close("clawgate doctor")
        account = f", logged in as account {connection.account}" if connection.account else ", not logged in"
        return logged_in(f"connected to {settings.host}:{settings.port} as {connection.nick}{account}")

    async def connect(self) -> None:
        connection = _connection(self.settings, self.kit.log)
        try:
            await _log_in(connection, self.settings)
            self.refused_channels = await connection.join(self.settings.channels)
        except BaseException:
            await connection.close()
            raise
        for refusal in self.refused_channels:
            self.kit.log.warning("IRC: could not join %s", refusal)
        self.connection, self.told = connection, set()
        self.kit.log.info("connected to %s:%s as %s (account %s), in %s", self.settings.host, self.settings.port,
                          connection.nick, connection.account or "none", ", ".join(self.settings.channels) or "no channel")

    async def run(self) -> None:
        connection = self.connection
        if connection is None:
            raise ChannelUnavailable("IRC: not connected")
        try:
            async for message in connection.messages(self.settings.idle_seconds):
                await self._on_message(connection, message)
        except Lost as exc:
            raise ChannelUnavailable(f"IRC connection to {self.settings.host} lost: {exc}") from None
        except (OSError, TimeoutError) as exc:
            raise ChannelUnavailable(f"IRC connection to {self.settings.host} lost: {exc or type(exc).__name__}") from None

    async def disconnect(self) -> None:
        connection, self.connection = self.connection, None
        if connection is not None:
            await connection.close("clawgate stopping")

    def status(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"server": f"{self.settings.host}:{self.settings.port}"}
        if self.connection is not None:
            facts.update(nick=self.connection.nick, account=self.connection.account or "none")
        if self.refused_channels:
            facts["not_joined"] = self.refused_channels
        return facts

    # -- receiving ----------------------------------------------------------------------------
    async def _on_message(self, connection: IrcConnection, message: Message) -> None:
        if message.command == "NICK" and casefold(message.nick) == casefold(connection.nick):
            connection.nick = message.param(0)
            return
        if message.command != "PRIVMSG" or len(message.params) < 2 or not message.prefix:
            return  # NOTICEs are never answered (the IRC rule that keeps bots from looping)
        target, text, nick = message.param(0), message.param(1), message.nick
        if casefold(nick) == casefold(connection.nick):
            return
        request = ctcp(text)
        if request is not None:
            if request[0] == "VERSION" and casefold(target) == casefold(connection.nick):
                await connection.send(line("NOTICE", nick, f"\x01VERSION {VERSION_REPLY}\x01"))
            return  # CTCP (ACTION, PING, VERSION...) is the client's business, never the agent's
        account = message.tags.get("account")
        if account in (None, "", "*"):
            sender = Sender(user_id=UNAUTHENTICATED + casefold(nick), display=nick)
        else:
            # the account is the id and the name: never the nick as a username, which the kit would bind an
            # owner entry to at first contact (a stranger on a free nick could claim it)
            sender = Sender(user_id=casefold(str(account)), username=casefold(str(account)), display=nick)
            self.nick_of[sender.user_id] = nick
        private = casefold(target) == casefold(connection.nick)
        if private:
            chat, body = sender.user_id, text.strip()
        else:
            chat, body = casefold(target), addressed_text(text, connection.nick)
            if body is None:
                return  # not for us: a channel is read only where the bot is named
        if sender.user_id.startswith(UNAUTHENTICATED) and not self._open_to_strangers(private):
            if private and nick not in self.told:  # told once; in a channel, silence
                self.told.add(nick)
                await connection.send(line("PRIVMSG", nick, NOT_LOGGED_IN))
            return
        message_id = message.tags.get("msgid") or f"local-{uuid.uuid4().hex}"
        await self.kit.receive(Incoming(message_id=message_id, chat_id=chat, sender=sender, private=private,
                                        text=self._command_form(body), addressed=True,
                                        metadata={"irc_nick": nick, "irc_target": target}))

    def _open_to_strangers(self, private: bool) -> bool:
        settings = self.settings
        if "*" in settings.allow_from:
            return True
        return settings.dm_policy == "open" if private else settings.group_policy == "open"

    def _command_form(self, text: str) -> str:
        """`!approve 3` -> `/approve 3`: IRC clients take a leading `/` as their own command, so `!` works too."""
        if not text.startswith("!"):
            return text
        word = text[1:].split(maxsplit=1)[0].lower() if text[1:].strip() else ""
        known = {name.lstrip("/").lower() for name, _ in (*self.kit.command_names(), *KIT_COMMANDS)}
        return "/" + text[1:] if word in known else text

    # -- sending ------------------------------------------------------------------------------
    def render(self, markdown: str) -> list[str]:
        connection = self.connection
        return render(markdown, line_bytes(connection.prefix if connection is not None else None))

    def _recipient(self, chat_id: str) -> str:
        if chat_id[:1] in "#&!+":
            return chat_id
        if chat_id.startswith(UNAUTHENTICATED):
            return chat_id[len(UNAUTHENTICATED):]
        return self.nick_of.get(chat_id, chat_id)  # on most networks an account's name is its nick too

    async def send_text(self, target: Target, text: str) -> str:
        """Each line of the chunk as PRIVMSGs cut under the 512-byte limit (with the prefix the server adds),
        paced by the token bucket."""
        connection = self.connection
        if connection is None:
            raise DeliveryError("IRC: not connected (reconnecting)")
        to = self._recipient(target.chat_id)
        prefix = connection.prefix or f"{connection.nick}!{UNKNOWN_PREFIX_TAIL}"
        budget = text_budget(prefix, "PRIVMSG", to)
        clean = str(text).translate(_UNSENDABLE)  # a CR or NUL would end the line early; \x01 would make it CTCP
        lines = [piece for row in clean.split("\n") if row.strip() for piece in split_bytes(row, budget)]
        sent = 0
        try:
            for piece in lines:
                await connection.send(line("PRIVMSG", to, piece))
                sent += 1
        except (Lost, OSError) as exc:
            if sent:
                raise Unconfirmed(f"IRC connection lost after {sent} of {len(lines)} lines: {exc}") from None
            raise DeliveryError(f"IRC: connection lost ({exc})") from None
        except ValueError as exc:
            raise DeliveryError(f"IRC: {exc}", permanent=True) from None
        return f"local-{uuid.uuid4().hex}"


def _connection(settings: IrcSettings, log: Any) -> IrcConnection:
    import logging

    secret = settings.sasl_password.get_secret_value() if settings.sasl_password else None
    server = settings.server_password.get_secret_value() if settings.server_password else None
    return IrcConnection(settings.host, settings.port, tls=settings.tls, tls_verify=settings.tls_verify,
                         ca_file=settings.tls_ca_file,
                         nick=settings.nick, username=settings.username, realname=settings.realname,
                         sasl_username=settings.sasl_username, sasl_password=secret, server_password=server,
                         certfile=settings.tls_certfile, keyfile=settings.tls_keyfile,
                         burst=settings.flood_burst, rate=settings.flood_lines_per_second,
                         timeout=settings.timeout_seconds, log=log or logging.getLogger("clawgate.channels.irc"))


def _fix(settings: IrcSettings) -> str:
    if settings.sasl_password:
        return "check [channels.irc] sasl_username / sasl_password (the bot's services account)"
    if settings.tls_certfile:
        return ("check [channels.irc] tls_certfile / tls_keyfile, and that the certificate's fingerprint is on the "
                "bot's account (NickServ CERT ADD)")
    return "check [channels.irc] nick and nickserv_password / server_password"


async def _log_in(connection: IrcConnection, settings: IrcSettings) -> None:
    """Open, register (SASL inside), NickServ IDENTIFY where configured; one-line errors."""
    if not settings.host.strip():
        raise ChannelAuthError("IRC: [channels.irc] host is not set: set it to the network's server "
                               "(CLAWGATE_CHANNELS__IRC__HOST)")
    where = f"{settings.host}:{settings.port}"
    try:
        await connection.open()
        await connection.register()
        if settings.nickserv_password and not connection.account:
            if not await connection.identify(settings.nickserv_password.get_secret_value()):
                raise ChannelAuthError(f"IRC: NickServ on {settings.host} did not log {connection.nick} in: "
                                       "check [channels.irc] nickserv_password")
    except AuthRefused as exc:
        raise ChannelAuthError(f"IRC: {exc}") from None
    except ssl.SSLCertVerificationError as exc:
        raise ChannelAuthError(f"IRC: {where}'s TLS certificate is not trusted ({exc.verify_message}): "
                               "set [channels.irc] tls_ca_file to its CA, or tls_verify = false on a network "
                               "you trust") from None
    except (Lost, OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
        reason = str(exc) or type(exc).__name__
        raise ChannelUnavailable(f"IRC server {where} not reachable: {reason}") from None


__all__ = ["IrcAdapter"]
