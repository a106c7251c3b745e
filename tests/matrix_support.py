"""A person on Matrix, for the tests: a real matrix-nio client against the test session's Synapse.

Why a thread of its own: the tests are synchronous (like the other channel tests) while nio is
asyncio; the person's client runs on its own event loop in a thread, keeps syncing in the background
and records every event it sees, so a test waits for a condition on what the person has received.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
import urllib.request
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, TypeVar

import pytest
from nio import AsyncClient, AsyncClientConfig, RoomCreateResponse, RoomSendResponse, SyncResponse

from tests.harness import DaemonProcess
from tests.servers.synapse import MatrixUser, Synapse
from tests.waiting import DEFAULT_TIMEOUT, wait_until

T = TypeVar("T")


@dataclass(frozen=True)
class Seen:
    """One event the person's client received."""

    room_id: str
    event_id: str
    sender: str
    type: str
    content: dict[str, Any]
    state_key: str | None = None
    encrypted: bool = False  # arrived end-to-end encrypted and was decrypted by this client

    @property
    def body(self) -> str:
        return str(self.content.get("body", ""))

    @property
    def thread(self) -> str | None:
        rel = self.content.get("m.relates_to") or {}
        return rel.get("event_id") if rel.get("rel_type") == "m.thread" else None


class Human:
    """A Matrix user driven from a test: create rooms, send, react, and read what arrived."""

    def __init__(self, server: Synapse, user: MatrixUser, *, sync: bool = True, store: Path | None = None) -> None:
        """`sync=False`: a person who only writes (the bench), without a background /sync loop.
        `store`: a folder for the client's keys: end-to-end encryption on (an E2E client like Element)."""
        self.server = server
        self.store = store
        if store is not None:
            store.mkdir(parents=True, exist_ok=True)
        self.user = user
        self.user_id = user.user_id
        self.events: list[Seen] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"human-{user.localpart}", daemon=True)
        self._thread.start()
        self.client: AsyncClient = self._run(self._make_client())
        self._stopping = False
        self._syncing = asyncio.run_coroutine_threadsafe(self._sync_forever() if sync else asyncio.sleep(0), self._loop)

    async def _make_client(self) -> AsyncClient:
        config = AsyncClientConfig(store_sync_tokens=False, encryption_enabled=self.store is not None)
        client = AsyncClient(self.server.base_url, self.user_id, config=config, store_path=str(self.store or ""))
        client.access_token, client.device_id = self.user.access_token, self.user.device_id
        if self.store is not None:
            client.restore_login(self.user_id, self.user.device_id, self.user.access_token)
            await client.keys_upload()
        return client

    async def _keys(self) -> None:
        if self.client.should_upload_keys:
            await self.client.keys_upload()
        if self.client.should_query_keys:
            await self.client.keys_query()
        if self.client.should_claim_keys:
            await self.client.keys_claim(self.client.get_users_for_key_claiming())
        await self.client.send_to_device_messages()

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float = DEFAULT_TIMEOUT) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _sync_forever(self) -> None:
        since: str | None = None
        while not self._stopping:
            resp = await self.client.sync(timeout=500, since=since)
            if not isinstance(resp, SyncResponse):
                await asyncio.sleep(0.2)
                continue
            since = resp.next_batch
            if self.store is not None:
                await self._keys()
            for room_id, info in resp.rooms.join.items():
                for event in info.timeline.events:
                    src = event.source
                    seen = Seen(room_id, src.get("event_id", ""), src.get("sender", ""), src.get("type", ""),
                                src.get("content") or {}, src.get("state_key"), bool(getattr(event, "decrypted", False)))
                    with self._lock:
                        self.events.append(seen)
                for event in info.ephemeral:
                    users = getattr(event, "users", None)
                    if users is not None:  # m.typing: who is typing now
                        with self._lock:
                            self.events.append(Seen(room_id, "", "", "m.typing", {"user_ids": list(users)}))
            for room_id in resp.rooms.invite:
                await self.client.join(room_id)

    # --- acting --------------------------------------------------------------------------------------
    def dm(self, other: str) -> str:
        """A direct chat with `other` (invited, is_direct); returns the room id."""
        resp = self._run(self.client.room_create(invite=[other], is_direct=True))
        assert isinstance(resp, RoomCreateResponse), resp
        return resp.room_id

    def room(self, *invite: str, name: str = "team") -> str:
        """A private group room with `invite` in it."""
        resp = self._run(self.client.room_create(name=name, invite=list(invite)))
        assert isinstance(resp, RoomCreateResponse), resp
        return resp.room_id

    def encrypted_dm(self, other: str) -> str:
        """A direct chat with end-to-end encryption switched on from the start (m.room.encryption)."""
        state = [{"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}}]
        resp = self._run(self.client.room_create(invite=[other], is_direct=True, initial_state=state))
        assert isinstance(resp, RoomCreateResponse), resp
        return resp.room_id

    def send_encrypted(self, room_id: str, n: int) -> str:
        """An m.room.encrypted event as an E2E client sends it (Megolm ciphertext nobody here can read)."""
        content = {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": f"AwgAEnCiphertext{n:04d}", "device_id": "HUMANDEV",
                   "sender_key": "c2VuZGVya2V5c2VuZGVya2V5c2VuZGVya2V5MDAwMDA", "session_id": f"c2Vzc2lvbi{n}"}
        return self._event(room_id, "m.room.encrypted", content)

    def join(self, room_id: str) -> None:
        self._run(self.client.join(room_id))

    def send(self, room_id: str, text: str, *, mention: str | None = None, thread: str | None = None,
             msgtype: str = "m.text") -> str:
        """A message as a client sends it; `mention` adds the user to m.mentions and the text, like Element."""
        content: dict[str, Any] = {"msgtype": msgtype, "body": text}
        if mention:
            content["body"] = f"{mention}: {text}"
            content["m.mentions"] = {"user_ids": [mention]}
        if thread:
            content["m.relates_to"] = {"rel_type": "m.thread", "event_id": thread, "is_falling_back": True,
                                       "m.in_reply_to": {"event_id": thread}}
        return self._event(room_id, "m.room.message", content)

    def send_file(self, room_id: str, name: str, data: bytes, mime: str = "text/plain",
                  declared: int | None = None) -> str:
        """Upload to the media repository and post an m.file pointing at it (`declared`: the size the event claims)."""
        encrypt = self.store is not None and self.client.rooms[room_id].encrypted

        async def upload() -> tuple[str, dict[str, Any] | None]:
            resp, keys = await self.client.upload(io.BytesIO(data), content_type=mime, filename=name,
                                                  filesize=len(data), encrypt=encrypt)
            return resp.content_uri, keys

        uri, keys = self._run(upload())
        where = {"file": {**keys, "url": uri}} if keys else {"url": uri}  # an encrypted room: the key travels E2E
        return self._event(room_id, "m.room.message", {"msgtype": "m.file", "body": name, **where,
                                                       "info": {"size": len(data) if declared is None else declared,
                                                                "mimetype": mime}})

    def react(self, room_id: str, event_id: str, key: str) -> str:
        return self._event(room_id, "m.reaction",
                           {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}})

    def _event(self, room_id: str, event_type: str, content: dict[str, Any]) -> str:
        resp = self._run(self.client.room_send(room_id, event_type, content, ignore_unverified_devices=True))
        assert isinstance(resp, RoomSendResponse), resp
        return resp.event_id

    # --- reading -------------------------------------------------------------------------------------
    def seen(self, room_id: str, sender: str | None = None, type: str = "m.room.message") -> list[Seen]:
        with self._lock:
            return [e for e in self.events if e.room_id == room_id and e.type == type
                    and (sender is None or e.sender == sender)]

    def members(self, room_id: str) -> set[str]:
        """Who is joined now, as far as the membership events this client saw tell."""
        last: dict[str, str] = {}
        for e in self.seen(room_id, type="m.room.member"):
            if e.state_key:
                last[e.state_key] = str(e.content.get("membership"))
        return {user for user, membership in last.items() if membership == "join"}

    def wait(self, check: Callable[[], T], what: str, timeout: float = DEFAULT_TIMEOUT,
             describe: Callable[[], str] | None = None) -> T:
        return wait_until(check, what, timeout=timeout, interval=0.05, describe=describe)

    def close(self) -> None:
        self._stopping = True
        try:
            self._syncing.result(30)
        finally:
            self._run(self.client.close())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)


@pytest.fixture
def humans(synapse: Synapse) -> Iterator[Callable[..., Human]]:
    """Make people on the session's Synapse; their clients are closed at the end of the test."""
    made: list[Human] = []

    def make(prefix: str = "human", store: Path | None = None) -> Human:
        person = Human(synapse, synapse.register(prefix), store=store)
        made.append(person)
        return person

    yield make
    for person in made:
        person.close()


@dataclass
class MatrixBot:
    """The daemon's bot account and the config lines that connect a daemon to it."""

    user: MatrixUser
    server: Synapse

    def login(self) -> str:
        """An access token from /login, the way the README tells a user to get one."""
        body = json.dumps({"type": "m.login.password", "identifier": {"type": "m.id.user", "user": self.user.localpart},
                           "password": self.user.password, "initial_device_display_name": "clawgate"}).encode()
        req = urllib.request.Request(f"{self.server.base_url}/_matrix/client/v3/login", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            return str(json.loads(resp.read())["access_token"])

    def devices(self) -> list[dict[str, Any]]:
        """The bot account's devices (GET /devices with the registration's own token)."""
        req = urllib.request.Request(f"{self.server.base_url}/_matrix/client/v3/devices",
                                     headers={"Authorization": f"Bearer {self.user.access_token}"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            return list(json.loads(resp.read())["devices"])

    def env(self, **settings: Any) -> dict[str, str]:
        values: dict[str, Any] = {"enabled": True, "homeserver": self.server.base_url, "user_id": self.user.user_id,
                                  "password": self.user.password, "sync_timeout_seconds": 2,
                                  "retry_base_seconds": 0.05, **settings}
        return {f"CLAWGATE_CHANNELS__MATRIX__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
                for k, v in values.items()}


@pytest.fixture
def matrix_bot(synapse: Synapse) -> MatrixBot:
    return MatrixBot(synapse.register("bot"), synapse)


@pytest.fixture
def mx_daemon(matrix_bot: MatrixBot, daemon_factory: Callable[..., DaemonProcess]) -> Callable[..., DaemonProcess]:
    """Start a daemon whose Matrix channel is the bot account; keyword arguments are channels.matrix settings."""

    def make(env: dict[str, str] | None = None, **settings: Any) -> DaemonProcess:
        return daemon_factory({**matrix_bot.env(**settings), **(env or {})})

    return make


def log_tail(daemon: DaemonProcess) -> Callable[[], str]:
    """A describe= for waits: the end of the daemon's log (its log file when `log.file` is on, else what
    it printed, which the harness keeps: tests leave the file off)."""
    def tail() -> str:
        path = Path(daemon.home) / "logs" / "clawgate.log"
        text = path.read_text(errors="replace") if path.exists() else "\n".join(daemon.output)
        return text[-4000:] or "(no daemon log)"
    return tail
