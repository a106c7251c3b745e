"""Discord API objects as the real API shapes them (users, guilds, channels, messages, interactions).

Why separate: the protocol parts (REST, Gateway) only move these objects around; their exact
shape is what discord.py parses, so it lives in one place that can be checked against the API
documentation field by field.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

JSONDict = dict[str, Any]

DISCORD_EPOCH_MS = 1420070400000
MAX_CONTENT = 2000  # counted in code points, as Python's len() (discord/discord-api-docs#1315)

# Gateway intents (https://discord.com/developers/docs/events/gateway#gateway-intents).
INTENT_GUILDS = 1 << 0
INTENT_GUILD_MEMBERS = 1 << 1  # privileged
INTENT_GUILD_PRESENCES = 1 << 8  # privileged
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_DIRECT_MESSAGES = 1 << 12
INTENT_MESSAGE_CONTENT = 1 << 15  # privileged
PRIVILEGED_INTENTS = INTENT_GUILD_MEMBERS | INTENT_GUILD_PRESENCES | INTENT_MESSAGE_CONTENT
# Every bit the v10 Gateway defines; IDENTIFY with any other bit is closed with 4013.
VALID_INTENTS = sum(1 << bit for bit in [*range(17), 20, 21, 24, 25])

CHANNEL_GUILD_TEXT = 0
CHANNEL_DM = 1
CHANNEL_PUBLIC_THREAD = 11

INTERACTION_APPLICATION_COMMAND = 2
INTERACTION_MESSAGE_COMPONENT = 3

_counter = itertools.count()
_counter_lock = threading.Lock()


def snowflake() -> str:
    """A new, increasing snowflake id (timestamp in the high bits, like Discord's)."""
    with _counter_lock:
        increment = next(_counter) & 0xFFF
    ms = int(time.time() * 1000) - DISCORD_EPOCH_MS
    return str((ms << 22) | (1 << 17) | increment)


def iso_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1e6) % 1_000_000:06d}+00:00"


def user(user_id: str, username: str, *, bot: bool = False) -> JSONDict:
    data: JSONDict = {
        "id": user_id,
        "username": username,
        "discriminator": "0",
        "global_name": None if bot else username.title(),
        "avatar": None,
        "public_flags": 0,
        "flags": 0,
        "banner": None,
        "accent_color": None,
        "avatar_decoration_data": None,
    }
    if bot:
        data["bot"] = True
    return data


def member(user_data: JSONDict | None, *, roles: list[str] | None = None) -> JSONDict:
    """A guild member; ``user_data`` None gives the partial member MESSAGE_CREATE carries."""
    data: JSONDict = {
        "roles": roles or [],
        "nick": None,
        "avatar": None,
        "joined_at": "2025-01-01T00:00:00.000000+00:00",
        "premium_since": None,
        "deaf": False,
        "mute": False,
        "pending": False,
        "flags": 0,
        "communication_disabled_until": None,
    }
    if user_data is not None:
        data["user"] = user_data
    return data


def text_channel(channel_id: str, name: str, guild_id: str, *, position: int = 0) -> JSONDict:
    return {
        "id": channel_id,
        "type": CHANNEL_GUILD_TEXT,
        "guild_id": guild_id,
        "name": name,
        "position": position,
        "permission_overwrites": [],
        "topic": None,
        "nsfw": False,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "parent_id": None,
        "flags": 0,
    }


def thread(thread_id: str, name: str, guild_id: str, parent_id: str, owner_id: str) -> JSONDict:
    """A public thread under a text channel (GUILD_CREATE lists the active ones in ``threads``)."""
    return {
        "id": thread_id,
        "type": CHANNEL_PUBLIC_THREAD,
        "guild_id": guild_id,
        "parent_id": parent_id,
        "owner_id": owner_id,
        "name": name,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "message_count": 0,
        "member_count": 1,
        "total_message_sent": 0,
        "flags": 0,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": 1440,
            "archive_timestamp": "2025-01-01T00:00:00.000000+00:00",
            "locked": False,
        },
    }


def dm_channel(channel_id: str, recipient: JSONDict) -> JSONDict:
    return {"id": channel_id, "type": CHANNEL_DM, "last_message_id": None, "flags": 0, "recipients": [recipient]}


def role(role_id: str, name: str, *, managed: bool = False, position: int = 1) -> JSONDict:
    """A guild role; a bot's own role (created when it is invited) is ``managed``."""
    return {"id": role_id, "name": name, "color": 0, "hoist": False, "icon": None, "unicode_emoji": None,
            "position": position, "permissions": "0", "managed": managed, "mentionable": True, "flags": 0}


def guild(guild_id: str, name: str, *, owner_id: str, channels: list[JSONDict], members: list[JSONDict],
          threads: list[JSONDict] | None = None, roles: list[JSONDict] | None = None) -> JSONDict:
    """The GUILD_CREATE payload: a full guild plus the Gateway-only extra fields."""
    everyone = {
        "id": guild_id,
        "name": "@everyone",
        "color": 0,
        "hoist": False,
        "icon": None,
        "unicode_emoji": None,
        "position": 0,
        "permissions": "559623605571137",  # Discord's default @everyone permissions
        "managed": False,
        "mentionable": False,
        "flags": 0,
    }
    listed = []
    for channel in channels:
        shown = dict(channel)
        shown.pop("guild_id", None)  # GUILD_CREATE's channels carry no guild_id
        listed.append(shown)
    return {
        "id": guild_id,
        "name": name,
        "icon": None,
        "splash": None,
        "discovery_splash": None,
        "owner_id": owner_id,
        "afk_channel_id": None,
        "afk_timeout": 300,
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "roles": [everyone, *(roles or [])],
        "emojis": [],
        "features": [],
        "mfa_level": 0,
        "application_id": None,
        "system_channel_id": None,
        "system_channel_flags": 0,
        "rules_channel_id": None,
        "max_members": 500000,
        "vanity_url_code": None,
        "description": None,
        "banner": None,
        "premium_tier": 0,
        "premium_subscription_count": 0,
        "preferred_locale": "en-US",
        "public_updates_channel_id": None,
        "nsfw_level": 0,
        "stickers": [],
        "premium_progress_bar_enabled": False,
        # Gateway-only fields
        "joined_at": "2025-01-01T00:00:00.000000+00:00",
        "large": False,
        "unavailable": False,
        "member_count": len(members),
        "voice_states": [],
        "members": members,
        "channels": listed,
        "threads": threads or [],
        "presences": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
        "soundboard_sounds": [],
    }


def attachment(attachment_id: str, filename: str, size: int, url: str, content_type: str | None) -> JSONDict:
    data: JSONDict = {
        "id": attachment_id,
        "filename": filename,
        "size": size,
        "url": url,
        "proxy_url": url,
    }
    if content_type:
        data["content_type"] = content_type
    return data


def message(
    message_id: str,
    channel_id: str,
    author: JSONDict,
    content: str,
    *,
    guild_id: str | None = None,
    mentions: list[JSONDict] | None = None,
    attachments: list[JSONDict] | None = None,
    embeds: list[JSONDict] | None = None,
    components: list[JSONDict] | None = None,
    message_reference: JSONDict | None = None,
    nonce: str | int | None = None,
    interaction_metadata: JSONDict | None = None,
) -> JSONDict:
    data: JSONDict = {
        "id": message_id,
        "type": 0 if message_reference is None else 19,
        "channel_id": channel_id,
        "author": author,
        "content": content,
        "timestamp": iso_now(),
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": mentions or [],
        "mention_roles": [],
        "attachments": attachments or [],
        "embeds": embeds or [],
        "components": components or [],
        "pinned": False,
        "flags": 0,
    }
    if guild_id is not None:
        data["guild_id"] = guild_id
    if message_reference is not None:
        data["message_reference"] = message_reference
    if nonce is not None:
        data["nonce"] = nonce
    if interaction_metadata is not None:
        data["interaction_metadata"] = interaction_metadata
    return data


def app_info(application_id: str, bot_user: JSONDict, owner: JSONDict) -> JSONDict:
    """GET /oauth2/applications/@me (discord.py's login reads it)."""
    return {
        "id": application_id,
        "name": bot_user["username"],
        "icon": None,
        "description": "",
        "rpc_origins": [],
        "bot_public": True,
        "bot_require_code_grant": False,
        "bot": bot_user,
        "owner": owner,
        "team": None,
        "verify_key": "0" * 64,
        "flags": 1 << 19 | 1 << 23,  # GATEWAY_MESSAGE_CONTENT_LIMITED | APPLICATION_COMMAND_BADGE
        "interactions_endpoint_url": None,
        "redirect_uris": [],
        "approximate_guild_count": 1,
        "summary": "",
        "hook": True,
    }


def error(code: int, message: str, errors: JSONDict | None = None) -> JSONDict:
    """Discord's error body: ``{"message", "code"}`` and, for form errors, the nested ``errors``."""
    body: JSONDict = {"message": message, "code": code}
    if errors is not None:
        body["errors"] = errors
    return body


def field_error(path: list[str | int], code: str, text: str) -> JSONDict:
    """The nested ``errors`` object of a 50035 Invalid Form Body for one field."""
    node: JSONDict = {"_errors": [{"code": code, "message": text}]}
    for key in reversed(path):
        node = {str(key): node}
    return node
