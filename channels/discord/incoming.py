"""A discord.py Message (or a slash command) as the kit's Incoming: who, where, addressed, text.

Pure apart from attachment downloads (IncomingFile.fetch, called by the kit after its size
check). "Addressed" follows Discord's own signals: a DM; the bot's user mentioned; a role the bot
holds mentioned (a server's "@Bots" role); or a reply to one of the bot's messages. The bot's
mention is removed from the text, other mentions are shown as @name / #channel.
"""

from __future__ import annotations

import re

import discord

from clawgate.channels.kit import Incoming, IncomingFile, Sender

# Only what a person writes; joins, pins, thread-created notices and the like are not messages to answer.
CHAT_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})
_MENTION = re.compile(r"<(@!?|@&|#)(\d+)>")


def sender_of(user: discord.abc.User) -> Sender:
    return Sender(user_id=str(user.id), username=user.name, display=user.display_name)


def place(channel: object) -> tuple[str, str | None]:
    """(chat_id, thread_id): a thread is a sub-conversation of its parent channel."""
    if isinstance(channel, discord.Thread) and channel.parent_id is not None:
        return str(channel.parent_id), str(channel.id)
    return str(getattr(channel, "id")), None


def _bot_roles(message: discord.Message, bot: discord.ClientUser) -> set[int]:
    me = message.guild.me if message.guild is not None else None
    return {role.id for role in getattr(me, "roles", ()) if not role.is_default()} if me is not None else set()


def _replies_to_bot(message: discord.Message, bot: discord.ClientUser) -> bool:
    resolved = message.reference.resolved if message.reference is not None else None
    return isinstance(resolved, discord.Message) and resolved.author.id == bot.id


def clean_text(message: discord.Message, bot: discord.ClientUser, bot_roles: set[int]) -> str:
    """The content with the bot's own mentions removed and other mentions made readable."""
    users = {m.id: m.display_name for m in message.mentions}
    roles = {r.id: r.name for r in message.role_mentions}
    channels = {c.id: getattr(c, "name", str(c.id)) for c in message.channel_mentions}

    def replace(match: re.Match[str]) -> str:
        kind, ident = match[1], int(match[2])
        if kind.startswith("@") and kind != "@&":
            return "" if ident == bot.id else f"@{users.get(ident, ident)}"
        if kind == "@&":
            return "" if ident in bot_roles else f"@{roles.get(ident, ident)}"
        return f"#{channels.get(ident, ident)}"

    return re.sub(r"[ \t]{2,}", " ", _MENTION.sub(replace, message.content)).strip()


def incoming_file(attachment: discord.Attachment) -> IncomingFile:
    mime = attachment.content_type
    kind = "image" if (mime or "").startswith("image/") else "file"
    return IncomingFile(name=attachment.filename, size=attachment.size, mime=mime, fetch=attachment.read, kind=kind)


def from_message(message: discord.Message, bot: discord.ClientUser) -> Incoming:
    private = message.guild is None
    roles = _bot_roles(message, bot)
    mentioned = bot.id in message.raw_mentions or bool(roles.intersection(message.raw_role_mentions))
    chat_id, thread_id = place(message.channel)
    metadata: dict[str, object] = {"discord_channel_id": str(message.channel.id)}
    if message.guild is not None:  # the scopes bindings match on (config/agents.py): the server and the sender's roles
        metadata["guild_id"] = str(message.guild.id)
        metadata["role_ids"] = member_roles(message.author, message.guild.id)
    return Incoming(
        message_id=str(message.id),
        chat_id=chat_id,
        sender=sender_of(message.author),
        private=private,
        text=clean_text(message, bot, roles),
        addressed=private or mentioned or _replies_to_bot(message, bot),
        thread_id=thread_id,
        files=tuple(incoming_file(a) for a in message.attachments),
        sender_is_bot=message.author.bot or message.webhook_id is not None,
        metadata=metadata,
    )


def member_roles(author: object, guild_id: int) -> list[str]:
    """The role ids of a guild member (not @everyone, whose id is the guild's); [] for a plain user."""
    return [str(role.id) for role in getattr(author, "roles", None) or [] if role.id != guild_id]


def command_text(interaction: discord.Interaction) -> str:
    """A slash command as the text the kit's command router reads: `/name arg ...`."""
    data = interaction.data or {}
    values = [str(o.get("value", "")) for o in data.get("options", []) or [] if "value" in o]
    return " ".join([f"/{data.get('name', '')}", *values]).strip()


def from_command(interaction: discord.Interaction) -> Incoming:
    chat_id, thread_id = place(interaction.channel) if interaction.channel is not None \
        else (str(interaction.channel_id), None)
    return Incoming(
        message_id=str(interaction.id),
        chat_id=chat_id,
        sender=sender_of(interaction.user),
        private=interaction.guild_id is None,
        text=command_text(interaction),
        addressed=True,  # a slash command is addressed to the application by construction
        thread_id=thread_id,
        sender_is_bot=interaction.user.bot,
        metadata={"discord_channel_id": str(interaction.channel_id), "interaction": str(interaction.id),
                  **({"guild_id": str(interaction.guild_id), "role_ids": member_roles(interaction.user, interaction.guild_id)}
                     if interaction.guild_id is not None else {})},
    )
