"""The boundary to neonize (the `whatsapp-linked` extra): which client the linked transport drives.

neonize runs whatsmeow in Go. Its synchronous `NewClient.connect()` blocks for the connection's life
(it runs on a worker thread), and Go calls each registered event handler on its own callback thread,
one event at a time, waiting for the handler to return. The asynchronous `NewAClient` instead hands
each event to one process-wide event loop (`neonize.aioze.events.event_global_loop`, set once) without
waiting; the sync client is used so each account's handler can block until the kit stored the message.

Nothing here imports neonize at module level: a daemon without a linked account never loads it.
`WHATSAPP_LINKED_TEST_CLIENT` (an environment variable, not a setting: no config.toml or
`CLAWGATE_CHANNELS__*` variable reaches it) names a module under `tests.fakes.` that replaces neonize for
the test suite; anything else named there is refused, and using it is logged.
"""

from __future__ import annotations

import importlib
import logging
import os
import sqlite3
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

TEST_CLIENT_VARIABLE = "WHATSAPP_LINKED_TEST_CLIENT"
_TEST_PREFIX = "tests.fakes."
SESSION_FILE = "session.db"


class LinkedClient(Protocol):
    """What the transport uses of neonize's `NewClient` (tests/unit/channels/whatsapp/test_linked_fake.py
    checks the fake against the real signatures)."""

    event: Any  # `client.event(EventClass)(handler)`, `client.event.qr(callback)`, `client.event.paircode`
    me: Any

    def connect(self) -> None: ...
    def stop(self) -> None: ...
    def disconnect(self) -> None: ...
    def send_message(self, to: Any, message: Any, link_preview: bool = False, ghost_mentions: str | None = None,
                     mentions_are_lids: bool = False, add_msg_secret: bool = False) -> Any: ...
    def send_chat_presence(self, jid: Any, state: Any, media: Any) -> None: ...
    def mark_read(self, *message_ids: str, chat: Any, sender: Any, receipt: Any, timestamp: int | None = None) -> Any: ...
    def download_any(self, message: Any, path: str | None = None) -> bytes | None: ...
    def upload(self, binary: bytes, media_type: Any = None) -> Any: ...
    def get_me(self) -> Any: ...
    def PairPhone(self, phone: str, show_push_notification: bool, client_name: Any = ...,  # noqa: N802 (neonize's name)
                  client_type: Any = None) -> str: ...


class NeonizeMissing(Exception):
    """neonize is not installed: one line naming the extra."""


def session_path(state: Path, account: str) -> Path:
    """state/whatsapp/<account>/session.db: whatsmeow's sqlite store (keys, the device's identity)."""
    return state / "whatsapp" / account / SESSION_FILE


def prepare_session_dir(path: Path) -> None:
    """The folder user-only; the database files (and sqlite's -wal/-shm beside it) 0600 once they exist."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm", f"{path.name}-journal"):
        found = path.parent / name
        if found.exists():
            os.chmod(found, 0o600)


def _test_module(log: logging.Logger | None) -> ModuleType | None:
    named = os.environ.get(TEST_CLIENT_VARIABLE, "").strip()
    if not named:
        return None
    if not named.startswith(_TEST_PREFIX):
        raise NeonizeMissing(f"{TEST_CLIENT_VARIABLE}={named!r} is not a module of the test suite's fakes "
                             f"({_TEST_PREFIX}…): unset it")
    if log is not None:
        log.warning("WhatsApp linked: using the test suite's client %s instead of neonize (%s is set)",
                    named, TEST_CLIENT_VARIABLE)
    return importlib.import_module(named)


def open_client(path: Path, name: str, log: logging.Logger | None = None) -> LinkedClient:
    """A client on the session database `path`, named `name` in neonize's Go registry (unique per account)."""
    fake = _test_module(log)
    if fake is not None:
        return fake.open_client(path, name)  # type: ignore[no-any-return]
    try:
        from neonize.client import NewClient
    except ImportError:
        raise NeonizeMissing("WhatsApp mode = \"linked\" needs neonize: pip install 'clawgate[whatsapp-linked]'") \
            from None
    # neonize warns at every connect that ffmpeg is missing; only its media conversions (stickers, video
    # thumbnails) need it, and clawgate uses none (documents go up as they are, media comes down as bytes)
    logging.getLogger("neonize.utils.ffmpeg").setLevel(logging.ERROR)
    return NewClient(str(path), uuid=name)  # type: ignore[return-value]


def stored_device(path: Path) -> str | None:
    """The JID of the device linked in the session database, or None (never linked, or logged out: whatsmeow
    deletes the device's row when WhatsApp logs it out). Read without neonize and without network."""
    fake = _test_module(None)
    if fake is not None:
        return fake.stored_device(path)  # type: ignore[no-any-return]
    if not path.exists():
        return None
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            row = db.execute("SELECT jid FROM whatsmeow_device LIMIT 1").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    return str(row[0]) if row else None


__all__ = ["LinkedClient", "NeonizeMissing", "TEST_CLIENT_VARIABLE", "open_client", "prepare_session_dir",
           "session_path", "stored_device"]
