"""Mail push: a watched mailbox (not a chat channel) whose new mail wakes the agent, a hook of kind "imap".

"Tell me when an invoice arrives and file it" needs no polling: the email channel's own IMAP code
(imap.py: one thread per mailbox, IDLE, UIDs) waits for mail, and each new message becomes a hook
call (agent/triggers/hooks.py) with the hook's template, session, delivery and taint — the mail's
words are somebody else's, so they arrive wrapped as untrusted data in a tainted run. The mail is
only read (BODY.PEEK: its flags stay as the person left them) and never answered by mail.

Nothing lost, nothing twice: the UID cursor (with UIDVALIDITY) is saved only after the message is
durably in the inbox; its id is the mail's Message-ID, so a mail read again (a crash before the
cursor was saved, a mailbox the server renumbered) is one run. On the first start, mail already in
the folder is not a trigger. A lost connection is retried with backoff; a refused login is retried
slowly and said in the log, never fatal to the daemon.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import time
from typing import Any, Callable

from clawgate.agent.bus import Intake
from clawgate.agent.triggers.hooks import Call, Hook, inbound, plain_id, render

from ..kit.store import ChannelStore
from .imap import Mailbox, MailboxAuthError, MailboxUnavailable
from .message import read_mail
from .settings import EmailSettings

log = logging.getLogger("clawgate.hooks")
RETRY_FIRST, RETRY_MAX = 1.0, 60.0   # reconnects after a lost connection, doubling
AUTH_RETRY = 300.0                   # a refused login: the password may be fixed meanwhile
RESCAN_DAYS = 1                      # a renumbered folder: mail since the last cursor's day, minus this, is read again


def mailbox_settings(name: str, table: dict[str, Any]) -> EmailSettings:
    """The hook's imap table as the email channel's settings; ValueError with one line naming the key."""
    from pydantic import ValidationError

    try:
        return EmailSettings.model_validate({**table, "enabled": True, "address": table.get("username", "")})
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"]) or "imap"
        raise ValueError(f"config error: hooks.{name}.imap.{key}: {first['msg'].lower()}") from None


class MailWatch:
    def __init__(self, hook: Hook, settings: EmailSettings, intake: Intake, store: ChannelStore, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.hook, self.settings, self.intake, self.store, self.clock = hook, settings, intake, store, clock
        # Mail delivered before the first start is not a trigger. INTERNALDATE has whole seconds, so mail of
        # the start's own second cannot be told apart: it counts as before (a mailbox that was full when the
        # watch was set up never floods the agent); from the next second on, mail is new.
        self.started = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) + dt.timedelta(seconds=1)
        self.state = "starting"

    async def run(self) -> None:
        """Watch until cancelled: connect, take what is new, wait in IDLE; reconnect when the connection goes."""
        delay = RETRY_FIRST
        s = self.settings
        while True:
            box = Mailbox(s)
            try:
                await box.connect()
                log.info("hook %s: watching %s on %s:%s as %s (%s)", self.hook.name, s.imap_folder, s.imap_host,
                         s.imap_server_port, s.login, "IDLE" if box.idle_supported else f"polled every {s.poll_seconds:g} s")
                self.state, delay = "watching", RETRY_FIRST
                last = await self._start_point(box)
                while True:
                    for uid in await box.uids_after(last):
                        await self._take(box, uid)
                        last = uid
                        self._save(box.uidvalidity, uid)
                    await box.wait()
            except MailboxAuthError as exc:
                self.state = "login refused"
                log.error("hook %s: %s; trying again in %g s", self.hook.name, exc, AUTH_RETRY)
                delay = AUTH_RETRY
            except MailboxUnavailable as exc:
                self.state = "reconnecting"
                log.warning("hook %s: lost the IMAP connection to %s (%s); again in %g s", self.hook.name,
                            s.imap_host, exc, delay)
            except Exception as exc:  # a store that refused the message (disk full): nothing is lost, the cursor did not move
                self.state = "retrying"
                log.error("hook %s: %s: %s; the mailbox is read again in %g s", self.hook.name, type(exc).__name__,
                          exc, delay)
            finally:
                await box.disconnect()
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX) if delay < AUTH_RETRY else delay

    async def _start_point(self, box: Mailbox) -> int:
        saved = self.store.cursor()
        if saved is None:
            last = await box.last_uid_before(self.started)
            self._save(box.uidvalidity, last)
            return last
        data = json.loads(saved)
        if int(data["uidvalidity"]) == box.uidvalidity:
            return int(data["uid"])
        log.warning("hook %s: the server renumbered %s (UIDVALIDITY %s -> %s); mail since %s is read again, each "
                    "message still one run", self.hook.name, self.settings.imap_folder, data["uidvalidity"],
                    box.uidvalidity, data["day"])
        since = dt.date.fromisoformat(str(data["day"])) - dt.timedelta(days=RESCAN_DAYS)
        uids = await box.uids_since(since)
        for uid in uids:
            await self._take(box, uid)
            self._save(box.uidvalidity, uid)
        last = max(uids, default=await box.highest_uid())
        self._save(box.uidvalidity, last)
        return last

    def _save(self, uidvalidity: int, uid: int) -> None:
        self.store.save_cursor(json.dumps({"uidvalidity": uidvalidity, "uid": uid, "day": dt.date.today().isoformat()}))

    async def _take(self, box: Mailbox, uid: int) -> None:
        s = self.settings
        fetched = await box.fetch(uid, s.max_message_bytes)
        if fetched is None:
            return  # expunged meanwhile
        raw, size = fetched
        try:
            mail = read_mail(raw, own_address=s.login, fallback_id=f"uid{box.uidvalidity}.{uid}")
        except Exception as exc:  # noqa: BLE001 - a mail the email package chokes on must not stop the watch
            log.warning("hook %s: UID %s cannot be read (%s); skipped", self.hook.name, uid, type(exc).__name__)
            return
        text = mail.text if size <= s.max_message_bytes else \
            f"[a mail of {size} bytes, over the {s.max_message_bytes} bytes read (max_message_bytes): only its subject is known]"
        fields = {"from": mail.sender, "name": mail.display, "subject": mail.subject, "text": text,
                  "message_id": mail.message_id, "attachments": [a.name for a in mail.attachments]}
        sender = f"{mail.display} <{mail.sender}>" if mail.display else mail.sender
        whole = f"From: {sender}\nSubject: {mail.subject}\n\n{text}"
        delivery = plain_id(mail.message_id.strip("<>"))
        now = self.clock()
        msg = inbound(self.hook, render(self.hook, fields, whole, {}, {}), delivery, now)
        accepted = await self.intake.publish_inbound_async(msg)
        await self.intake.durable()  # before the cursor moves past it
        self.hook.calls.append(Call(now, 202, msg.id, "" if accepted else "a mail read again: one run"))
        log.info("hook %s: mail UID %s %s", self.hook.name, uid, "accepted" if accepted else "was already accepted")
