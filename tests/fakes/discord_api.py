"""A fake Discord server for tests: REST API v10, the Gateway over WebSocket, and the CDN.

Why: the Discord adapter must be exercised with the real discord.py client (its Gateway
session, heartbeats, RESUME and rate-limit handling are part of what is tested), without the
network. The implementation lives in the ``tests.fakes.discord`` package, one module per job;
this module re-exports what tests use.

Use::

    with FakeDiscord() as fake:                 # own thread and loop, a free 127.0.0.1 port
        fake.api_url, fake.ws_url, fake.token   # REST base (for Route.BASE / base_url), Gateway, bot token
        with fake.discord_py_pointed_here():    # in-process discord.py: Route.BASE + DEFAULT_GATEWAY only
            ...

The world: ``fake.bot_user`` (application ``fake.application_id``), guild ``fake.guild_id`` with
text channel ``fake.channel_id`` (#general) and a public thread ``fake.thread_id`` under it,
people ``fake.owner_user`` (alice, the application owner) and ``fake.other_user`` (bob).
Privileged intents granted: MESSAGE_CONTENT only (``privileged_intents=`` to change).

Inject: ``inject_dm``, ``inject_guild_message(mention_bot=, attachments=[(name, bytes, type)])``,
``redeliver(message)``, ``inject_event``, ``press_button(message_id, custom_id, user_id=)``,
``run_command(name, channel_id=)``; Gateway: ``force_reconnect`` (op 7), ``invalidate_session``
(op 9), ``drop_connections(code)``, ``expire_sessions``; REST: ``rate_limit(path_regex,
retry_after=)``, ``fail(path_regex, status=, code=, message=)``.

Read: ``sent_messages/sent_texts(channel_id)``, ``requests(method, path_prefix)`` (``RestCall``:
json, files, status, response), ``received_frames(op)``, ``dispatched(event)``,
``interaction(id)`` (response, responded_after, refused), ``commands``, ``identifies``,
``resumes``; wait with ``wait_for(predicate)`` (blocking thread) or ``await
wait_for_async(predicate)`` (from the event loop that runs an in-process client).
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
