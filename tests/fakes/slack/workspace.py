"""The fake workspace: team, bot identity, users, conversations, messages and files.

Plain data, mutated only under the server's lock. IDs follow Slack's shapes (T…, U…, B…, C…, D…,
F…) so code that looks at the first letter (D = DM) behaves as it would against Slack.
"""

from __future__ import annotations

import itertools
import time
import uuid
from typing import Any

JSONDict = dict[str, Any]

TEAM_ID = "T0FAKE0001"
TEAM_NAME = "Fake Team"
TEAM_DOMAIN = "fake-team"
APP_ID = "A0FAKE0001"
BOT_ID = "B0FAKE0001"
BOT_USER_ID = "U0FAKEBOT1"
BOT_NAME = "clawgate"
OWNER_ID = "U0OWNER001"
OWNER_DM = "D0OWNER001"
GENERAL = "C0GENERAL1"


class Workspace:
    def __init__(self) -> None:
        self.users: dict[str, JSONDict] = {}
        self.channels: dict[str, JSONDict] = {}
        self.messages: list[JSONDict] = []  # every message in every conversation, in post order
        self.files: dict[str, JSONDict] = {}
        self.deleted: list[JSONDict] = []  # messages removed by chat.delete
        self._ts_counter = itertools.count(1)
        self._ids = itertools.count(1)
        self.add_user(BOT_USER_ID, BOT_NAME, is_bot=True, bot_id=BOT_ID)
        self.add_user(OWNER_ID, "owner", real_name="Owner Person")
        self.add_channel(OWNER_DM, is_im=True, user=OWNER_ID)
        self.add_channel(GENERAL, name="general", is_member=True)

    # -- population ------------------------------------------------------------------------
    def add_user(self, user_id: str, name: str, *, real_name: str | None = None, is_bot: bool = False,
                 bot_id: str | None = None, tz: str = "Europe/Berlin") -> JSONDict:
        user = {
            "id": user_id, "team_id": TEAM_ID, "name": name, "deleted": False,
            "real_name": real_name or name, "tz": tz, "tz_offset": 3600, "is_bot": is_bot,
            "is_admin": False, "is_owner": False, "is_app_user": False, "updated": int(time.time()),
            "profile": {"real_name": real_name or name, "display_name": name, "team": TEAM_ID,
                        **({"bot_id": bot_id} if bot_id else {})},
        }
        self.users[user_id] = user
        return user

    def add_channel(self, channel_id: str, *, name: str | None = None, is_im: bool = False,
                    user: str | None = None, is_private: bool = False, is_member: bool = True) -> JSONDict:
        chan: JSONDict = {"id": channel_id, "created": int(time.time()), "is_archived": False}
        if is_im:
            chan.update({"is_im": True, "is_channel": False, "is_group": False, "is_private": True,
                         "user": user, "is_open": True, "is_member": True})
        else:
            chan.update({"name": name or channel_id.lower(), "is_im": False, "is_channel": not is_private,
                         "is_group": is_private, "is_private": is_private, "is_member": is_member,
                         "is_mpim": False, "is_general": name == "general"})
        self.channels[channel_id] = chan
        return chan

    # -- ids -------------------------------------------------------------------------------
    def next_ts(self) -> str:
        """A message timestamp: unique and increasing, shaped like Slack's "1700000000.000100"."""
        return f"{int(time.time())}.{next(self._ts_counter):06d}"

    def next_id(self, prefix: str) -> str:
        return f"{prefix}0FAKE{next(self._ids):05d}"

    @staticmethod
    def event_id() -> str:
        return "Ev" + uuid.uuid4().hex[:10].upper()

    def channel_type(self, channel_id: str) -> str:
        chan = self.channels.get(channel_id, {})
        if chan.get("is_im"):
            return "im"
        return "group" if chan.get("is_private") else "channel"

    def find_message(self, channel: str, ts: str) -> JSONDict | None:
        for msg in self.messages:
            if msg["channel"] == channel and msg["ts"] == ts:
                return msg
        return None

    # -- payload builders ------------------------------------------------------------------
    def add_user_file(self, *, name: str, data: bytes, mimetype: str, user: str) -> JSONDict:
        """A file a person uploaded: served at its url_private to the bot token only."""
        file_id = self.next_id("F")
        f = {"id": file_id, "name": name, "title": name, "mimetype": mimetype, "length": len(data),
             "data": data, "completed": True, "shared_by_user": user, "upload_key": uuid.uuid4().hex}
        self.files[file_id] = f
        return f

    @staticmethod
    def file_object(base_url: str, f: JSONDict) -> JSONDict:
        """The file object in a message event and in files.info (the fields apps read)."""
        url = f"{base_url}/files-pri/{TEAM_ID}-{f['id']}/{f['name']}"
        return {"id": f["id"], "created": int(time.time()), "timestamp": int(time.time()),
                "name": f["name"], "title": f["title"], "mimetype": f["mimetype"],
                "filetype": f["name"].rsplit(".", 1)[-1], "user": f.get("shared_by_user"),
                "size": f["length"], "mode": "hosted", "is_external": False, "is_public": False,
                "url_private": url, "url_private_download": f"{url}?download=1"}

    def event_callback(self, event: JSONDict) -> JSONDict:
        """The Events API outer payload (same in Socket Mode envelopes and HTTP requests)."""
        return {
            "token": "fake-verification-token", "team_id": TEAM_ID, "context_team_id": TEAM_ID,
            "api_app_id": APP_ID, "event": event, "type": "event_callback",
            "event_id": self.event_id(), "event_time": int(time.time()),
            "authorizations": [{"enterprise_id": None, "team_id": TEAM_ID, "user_id": BOT_USER_ID,
                                "is_bot": True, "is_enterprise_install": False}],
            "is_ext_shared_channel": False,
            "event_context": "4-" + uuid.uuid4().hex,
        }

    def user_message(self, *, text: str, user: str, channel: str, thread_ts: str | None,
                     kind: str) -> JSONDict:
        """A message a person posted (stored in history) and its event (kind message|app_mention)."""
        ts = self.next_ts()
        stored = {"channel": channel, "ts": ts, "text": text, "user": user, "type": "message",
                  "team": TEAM_ID, "client_msg_id": str(uuid.uuid4())}
        if thread_ts:
            stored["thread_ts"] = thread_ts
        self.messages.append(stored)
        event: JSONDict = {"type": kind, "user": user, "text": text, "ts": ts, "channel": channel,
                           "event_ts": ts, "team": TEAM_ID, "client_msg_id": stored["client_msg_id"],
                           "blocks": [{"type": "rich_text", "block_id": uuid.uuid4().hex[:5], "elements": [
                               {"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}]}]}
        if kind == "message":
            event["channel_type"] = self.channel_type(channel)
        if thread_ts:
            event["thread_ts"] = thread_ts
        return event

    def block_actions(self, *, action_id: str, value: str | None, message: JSONDict, user: str,
                      block_id: str | None, response_url: str) -> JSONDict:
        action: JSONDict = {"type": "button", "action_id": action_id, "block_id": block_id or "b1",
                            "text": {"type": "plain_text", "text": action_id, "emoji": True},
                            "action_ts": f"{time.time():.6f}"}
        if value is not None:
            action["value"] = value
        for block in message.get("blocks") or []:  # take the pressed button's own fields when present
            for el in block.get("elements") or []:
                if el.get("action_id") == action_id:
                    action.update({k: el[k] for k in ("text", "value", "style") if k in el})
                    action["block_id"] = block.get("block_id", action["block_id"])
        channel = message["channel"]
        return {
            "type": "block_actions",
            "user": {"id": user, "username": self.users.get(user, {}).get("name", user),
                     "name": self.users.get(user, {}).get("name", user), "team_id": TEAM_ID},
            "api_app_id": APP_ID, "token": "fake-verification-token",
            "container": {"type": "message", "message_ts": message["ts"], "channel_id": channel,
                          "is_ephemeral": False},
            "trigger_id": f"{next(self._ids)}.{TEAM_ID}.{uuid.uuid4().hex}",
            "team": {"id": TEAM_ID, "domain": TEAM_DOMAIN}, "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": channel, "name": self.channels.get(channel, {}).get("name", "directmessage")},
            "message": {k: v for k, v in message.items() if k != "channel"},
            "state": {"values": {}}, "response_url": response_url, "actions": [action],
        }

    def slash_command(self, *, command: str, text: str, user: str, channel: str,
                      response_url: str) -> JSONDict:
        chan = self.channels.get(channel, {})
        return {
            "token": "fake-verification-token", "team_id": TEAM_ID, "team_domain": TEAM_DOMAIN,
            "channel_id": channel, "channel_name": chan.get("name", "directmessage"),
            "user_id": user, "user_name": self.users.get(user, {}).get("name", user),
            "command": command, "text": text, "api_app_id": APP_ID, "is_enterprise_install": "false",
            "response_url": response_url,
            "trigger_id": f"{next(self._ids)}.{TEAM_ID}.{uuid.uuid4().hex}",
        }
