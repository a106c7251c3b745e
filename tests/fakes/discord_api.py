"""A fake Discord server for tests: REST API v10, the Gateway over WebSocket, and the CDN.

Why: the Discord adapter must be exercised with the real discord.py client (its Gateway
session, heartbeats, RESUME and rate-limit handling are part of what is tested), without the
network. The implementation lives in the ``tests.fakes.discord`` package, one module per job;
this module re-exports what tests use.
"""

from __future__ import annotations

from tests.fakes.discord.interactions import Interaction
from tests.fakes.discord.payloads import (
    INTENT_DIRECT_MESSAGES,
    INTENT_GUILD_MESSAGES,
    INTENT_GUILDS,
    INTENT_MESSAGE_CONTENT,
    MAX_CONTENT,
)
from tests.fakes.discord.records import GatewayFrame, RestCall, UploadedFile
from tests.fakes.discord.server import FakeDiscord

__all__ = [
    "FakeDiscord",
    "GatewayFrame",
    "Interaction",
    "RestCall",
    "UploadedFile",
    "MAX_CONTENT",
    "INTENT_GUILDS",
    "INTENT_GUILD_MESSAGES",
    "INTENT_DIRECT_MESSAGES",
    "INTENT_MESSAGE_CONTENT",
]
