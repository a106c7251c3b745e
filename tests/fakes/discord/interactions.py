"""Interactions: INTERACTION_CREATE for a button press or an application command, and the answers.

Discord refuses an initial response that comes more than 3 seconds after the interaction was
created (404, code 10062 "Unknown interaction") and a second initial response (400, code 40060);
after the initial response the interaction token serves follow-ups (POST /webhooks/{app}/{token},
PATCH .../messages/@original) for 15 minutes.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.discord import payloads as P
from tests.fakes.discord.records import RestCall
from tests.fakes.discord.rest import ApiError, form_error

JSONDict = dict[str, Any]

# Interaction callback types (https://discord.com/developers/docs/interactions/receiving-and-responding)
PONG, MESSAGE, DEFERRED_MESSAGE, DEFERRED_UPDATE, UPDATE_MESSAGE, AUTOCOMPLETE, MODAL = 1, 4, 5, 6, 7, 8, 9
TOKEN_LIFETIME = 15 * 60


@dataclass
class Interaction:
    payload: JSONDict
    created: float  # time.monotonic() when INTERACTION_CREATE was dispatched
    response: JSONDict | None = None  # the initial response's body, once accepted
    response_type: int | None = None
    responded_after: float | None = None  # seconds from creation to the accepted initial response
    refused: list[tuple[int, JSONDict]] = field(default_factory=list)  # (status, error body) of refused answers
    original_message: JSONDict | None = None

    @property
    def id(self) -> str:
        return self.payload["id"]


class Interactions:
    """``FakeDiscord`` part: creating interactions and answering their callbacks."""

    interaction_deadline: float = 3.0

    def interaction(self, interaction_id: str) -> Interaction:
        with self._cond:
            return self.interactions[str(interaction_id)]

    def _interaction_base(self, itype: int, channel_id: str, user_id: str, data: JSONDict) -> JSONDict:
        channel = self.channels[str(channel_id)]
        user = self.users[str(user_id)]
        payload: JSONDict = {
            "id": P.snowflake(),
            "application_id": self.application_id,
            "type": itype,
            "data": data,
            "channel_id": channel["id"],
            "channel": channel,
            "token": "aW50ZXJhY3Rpb24" + secrets.token_urlsafe(48),
            "version": 1,
            "app_permissions": "2248473465835073",
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": channel.get("guild_id") or "0"} if channel.get("guild_id")
            else {"1": user_id},
            "context": 0 if channel.get("guild_id") else 1,
            "attachment_size_limit": 10 * 1024 * 1024,
        }
        if channel.get("guild_id"):
            payload["guild_id"] = channel["guild_id"]
            payload["guild_locale"] = "en-US"
            payload["guild"] = {"id": channel["guild_id"], "locale": "en-US", "features": []}
            payload["member"] = {**P.member(user), "permissions": "2248473465835073"}
        else:
            payload["user"] = user
        return payload

    def press_button(self, message_id: str | int, custom_id: str, *, user_id: str | int | None = None) -> JSONDict:
        """A user presses the button ``custom_id`` on a message the bot sent: INTERACTION_CREATE type 3."""
        with self._cond:
            message = next((m for ms in self.messages.values() for m in ms if m["id"] == str(message_id)), None)
        if message is None:
            raise KeyError(f"no message {message_id} in the fake")
        buttons = [c for row in message.get("components", []) for c in row.get("components", [])]
        if not any(b.get("custom_id") == custom_id for b in buttons):
            raise KeyError(f"message {message_id} has no component with custom_id {custom_id!r}")
        payload = self._interaction_base(
            P.INTERACTION_MESSAGE_COMPONENT, message["channel_id"], str(user_id or self.human_user["id"]),
            {"custom_id": custom_id, "component_type": 2},
        )
        payload["message"] = message
        return self._create_interaction(payload)

    def run_command(self, name: str, *, channel_id: str | int, user_id: str | int | None = None,
                    options: list[JSONDict] | None = None) -> JSONDict:
        """A user runs the registered slash command ``/name``: INTERACTION_CREATE type 2."""
        channel = self.channels[str(channel_id)]
        with self._cond:
            registered = [*self.commands.get(None, []), *self.commands.get(channel.get("guild_id"), [])]
        command = next((c for c in registered if c["name"] == name and c["type"] == 1), None)
        if command is None:
            raise KeyError(f"/{name} is not registered (registered: {[c['name'] for c in registered]})")
        data: JSONDict = {"id": command["id"], "name": name, "type": 1}
        if options:
            data["options"] = options
        if command.get("guild_id"):
            data["guild_id"] = command["guild_id"]
        payload = self._interaction_base(
            P.INTERACTION_APPLICATION_COMMAND, str(channel_id), str(user_id or self.human_user["id"]), data)
        return self._create_interaction(payload)

    def _create_interaction(self, payload: JSONDict) -> JSONDict:
        with self._cond:  # the 3 s start when Discord sends the event
            self.interactions[payload["id"]] = Interaction(payload, time.monotonic())
        self._dispatch_all("INTERACTION_CREATE", payload)
        return payload

    async def _interaction_callback(self, call: RestCall, interaction_id: str, token: str) -> tuple[int, Any]:
        now = time.monotonic()
        with self._cond:
            inter = self.interactions.get(interaction_id)
        if inter is None or inter.payload["token"] != token or now - inter.created > self.interaction_deadline:
            error = ApiError(404, P.error(10062, "Unknown interaction"))
            if inter is not None:
                with self._cond:
                    inter.refused.append((404, error.body))
            raise error
        if inter.response is not None:
            error = ApiError(400, P.error(40060, "Interaction has already been acknowledged."))
            with self._cond:
                inter.refused.append((400, error.body))
            raise error
        body = call.json if isinstance(call.json, dict) else {}
        rtype = body.get("type")
        component = inter.payload["type"] == P.INTERACTION_MESSAGE_COMPONENT
        allowed = {MESSAGE, DEFERRED_MESSAGE, MODAL} | ({DEFERRED_UPDATE, UPDATE_MESSAGE} if component else set())
        if rtype not in allowed:
            raise form_error(["type"], "INTERACTION_CALLBACK_TYPE_INVALID", "Invalid interaction callback type")
        data = body.get("data") or {}
        channel = self.channels[inter.payload["channel_id"]]
        message: JSONDict | None = None
        if rtype == MESSAGE:
            self.rest._check_message_body(data, call.files, creating=True)
            meta = {"id": inter.id, "type": inter.payload["type"], "user": self.users.get(
                (inter.payload.get("member") or {}).get("user", inter.payload.get("user", {})).get("id", ""))}
            message = self.rest._build_message(channel, data, call.files, interaction_metadata=meta)
            await self._store_and_dispatch(message)
        elif rtype == UPDATE_MESSAGE:
            self.rest._check_message_body(data, call.files, creating=False)
            message = self._find(inter.payload["message"]["id"])
            if message is not None:
                await self._apply_edit(message, data, call.files)
        with self._cond:
            inter.response, inter.response_type = body, rtype
            inter.responded_after = now - inter.created
            inter.original_message = message
            self._cond.notify_all()
        if call.query.get("with_response") not in ("1", "true", "True"):
            return 204, None
        answer: JSONDict = {"interaction": {
            "id": inter.id, "type": inter.payload["type"],
            "response_message_loading": rtype == DEFERRED_MESSAGE,
            "response_message_ephemeral": bool(int(data.get("flags") or 0) & 64),
        }, "resource": {"type": rtype}}
        if message is not None:
            answer["interaction"]["response_message_id"] = message["id"]
            answer["resource"]["message"] = message
        return 200, answer

    async def _followup(self, call: RestCall, app_id: str, token: str, message_id: str | None) -> tuple[int, Any]:
        with self._cond:
            inter = next((i for i in self.interactions.values() if i.payload["token"] == token), None)
        if app_id != self.application_id or inter is None or inter.response is None \
                or time.monotonic() - inter.created > TOKEN_LIFETIME:
            raise ApiError(404, P.error(10015, "Unknown Webhook"))
        channel = self.channels[inter.payload["channel_id"]]
        body = self.rest._check_message_body(call.json, call.files, creating=message_id is None)
        if message_id is None:
            message = self.rest._build_message(channel, body, call.files)
            await self._store_and_dispatch(message)
            return 200, message
        target = inter.original_message if message_id == "@original" else self._find(message_id)
        if target is None and message_id == "@original" and inter.response_type == DEFERRED_MESSAGE:
            target = self.rest._build_message(channel, body, call.files)  # the deferred answer arrives
            with self._cond:
                inter.original_message = target
            await self._store_and_dispatch(target)
            return 200, target
        if target is None:
            raise ApiError(404, P.error(10008, "Unknown Message"))
        await self._apply_edit(target, body, call.files)
        return 200, target
