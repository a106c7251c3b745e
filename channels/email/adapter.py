"""The email adapter: a mailbox read over IMAP, answers sent over SMTP, on the channel kit.

Per mail, in UID order: fetch it (without marking it read), drop what must never be answered
(machine-sent, list or bulk mail, bounces, our own mail, a From that does not name exactly one address
cleanly or, with authserv_id set, that the receiving server's DMARC check did not confirm, a sender the access rules do not admit: a stranger gets no answer at all, so a forged From never
gets mail), hand the rest to the kit, and only after `kit.receive` returned save (UIDVALIDITY, UID).
A crash between the two re-reads that mail after a restart; the kit knows its Message-ID and does
not answer it twice. A changed UIDVALIDITY (the server renumbered the folder) re-reads the mail of
the days since the last one seen, again answered once thanks to the Message-ID.

Replies go to the From address only (never Reply-To, which would let a sender aim the bot's mail at
a third party), threaded under the mail they answer: In-Reply-To, References, "Re:" once.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from dataclasses import replace
from typing import Any, ClassVar

from clawgate.channels.base import DeliveryError
from clawgate.channels.kit import (
    AdapterKit, Capabilities, ChannelAuthError, ChannelUnavailable, Incoming, IncomingFile, PlatformAdapter, Sender,
    Target, Verdict, decide,
)

from clawgate.channels.kit.probe import ProbeResult

from .compose import OutFile, compose, new_message_id
from .imap import Mailbox, MailboxAuthError, MailboxUnavailable
from .message import Attachment, MailIn, read_mail
from .settings import EmailSettings
from .smtp import send_mail

# "approve ID" / "deny ID" as the first words of a reply (the kit's commands are "/approve ID").
_APPROVAL = re.compile(r"^\s*/?(approve|deny)\s+([A-Za-z0-9_-]+)\b", re.IGNORECASE)
LATEST_KEY = "latest:"  # kv: sender address -> Message-ID of their latest mail (files are sent in its thread)
THREAD_KEY = "thread:"  # kv: Message-ID -> {"subject", "references"} of a mail we may answer
OUT_KEY = "out:"  # kv: hash of (recipient, answered Message-ID, text) -> {"id", "sent"} of our answer
RESCAN_DAYS = 1  # after a UIDVALIDITY change, re-read mail from this many days before the last seen


def approval_command(text: str) -> str:
    """`approve ID` written in a mail reply becomes the kit's `/approve ID` command."""
    match = _APPROVAL.match(text)
    return f"/{match.group(1).lower()} {match.group(2)}" if match else text


class EmailAdapter(PlatformAdapter):
    name: ClassVar[str] = "email"
    settings_model: ClassVar[type[EmailSettings]] = EmailSettings
    account_fields: ClassVar[tuple[str, ...]] = ("imap_host", "username", "address", "imap_folder")
    capabilities: ClassVar[Capabilities] = Capabilities(max_chars=0, dm_is_user_id=True, files=True,
                                                        max_file_bytes=20 * 1024 * 1024)  # what most mail servers take

    settings: EmailSettings
    kit: AdapterKit

    def owner_chat(self, owner: str) -> str | None:
        """An address is the conversation with that person (a new mail to it); a domain entry is nobody's."""
        local, at, domain = owner.rpartition("@")
        return owner if at and local and domain else None

    def __init__(self, settings: EmailSettings, kit: AdapterKit) -> None:  # type: ignore[override]
        super().__init__(settings, kit)
        self.mailbox: Mailbox | None = None
        # Built as the daemon starts: on the channel's first start, mail delivered before now is old.
        self.started = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)

    @classmethod
    def enabled(cls, settings: Any) -> bool:
        return bool(getattr(settings, "active", False))

    @classmethod
    async def probe(cls, settings: Any) -> ProbeResult:
        """IMAP log-in and SMTP EHLO/AUTH (channels/email/probe.py)."""
        from .probe import probe

        return await probe(settings)

    # receiving --------------------------------------------------------------------------------
    async def connect(self) -> None:
        s = self.settings
        missing = [key for key in ("address", "imap_host", "password") if not getattr(s, key)]
        if missing:
            raise ChannelAuthError(f"channels.email needs {', '.join(missing)}: set them in [channels.email] "
                                   "(or CLAWGATE_CHANNELS__EMAIL__<KEY>)")
        await self.disconnect()  # a reconnect after a lost connection: the old one's socket and thread go
        self.mailbox = Mailbox(s)
        try:
            await self.mailbox.connect()
        except MailboxAuthError as exc:
            raise ChannelAuthError(str(exc)) from None
        except MailboxUnavailable as exc:
            raise ChannelUnavailable(f"cannot reach the IMAP server {s.imap_host}:{s.imap_server_port}: {exc}") from None
        self.kit.log.info("connected to IMAP %s:%s as %s (%s, %s); sending through SMTP %s:%s", s.imap_host,
                          s.imap_server_port, s.login, s.imap_folder,
                          "IDLE" if self.mailbox.idle_supported else f"polled every {s.poll_seconds:g} s",
                          s.smtp_server, s.smtp_server_port)

    async def disconnect(self) -> None:
        box, self.mailbox = self.mailbox, None
        if box is not None:
            await box.disconnect()

    async def run(self) -> None:
        box = self.mailbox
        if box is None:
            raise ChannelUnavailable("run() before connect()")
        try:
            last = await self._start_point(box)
            while True:
                for uid in await box.uids_after(last):
                    await self._take(box, uid)
                    last = uid
                    self._save(box.uidvalidity, last)
                await box.wait()
        except MailboxUnavailable as exc:
            raise ChannelUnavailable(f"lost the IMAP connection: {exc}") from None
        except MailboxAuthError as exc:
            raise ChannelAuthError(str(exc)) from None

    async def _start_point(self, box: Mailbox) -> int:
        """The UID after which mail is new. First start: mail delivered before the daemon started is not answered."""
        saved = self._saved()
        if saved is None:
            last = await box.last_uid_before(self.started)
            self.kit.log.info("email: first start; mail delivered to %s before the daemon started is not answered",
                              self.settings.imap_folder)
            self._save(box.uidvalidity, last)
            return last
        validity, last, day = saved
        if validity == box.uidvalidity:
            return last
        self.kit.log.warning("email: the server renumbered %s (UIDVALIDITY %s -> %s); re-reading mail since %s, "
                             "answering only what was not answered", self.settings.imap_folder, validity,
                             box.uidvalidity, day)
        since = dt.date.fromisoformat(day) - dt.timedelta(days=RESCAN_DAYS)
        uids = await box.uids_since(since)
        for uid in uids:
            await self._take(box, uid)
            self._save(box.uidvalidity, uid)
        last = max(uids, default=await box.highest_uid())
        self._save(box.uidvalidity, last)
        return last

    def _saved(self) -> tuple[int, int, str] | None:
        raw = self.kit.store.cursor()
        if not raw:
            return None
        data = json.loads(raw)
        return int(data["uidvalidity"]), int(data["uid"]), str(data.get("day") or dt.date.today().isoformat())

    def _save(self, uidvalidity: int, uid: int) -> None:
        self.kit.store.save_cursor(json.dumps({"uidvalidity": uidvalidity, "uid": uid,
                                               "day": dt.date.today().isoformat()}))

    async def _take(self, box: Mailbox, uid: int) -> None:
        s = self.settings
        fetched = await box.fetch(uid, s.max_message_bytes)
        if fetched is None:
            return
        raw, size = fetched
        try:
            mail = read_mail(raw, own_address=s.address, authserv_id=s.authserv_id,
                             fallback_id=f"uid{box.uidvalidity}.{uid}")
        except Exception as exc:  # noqa: BLE001 - a mail the email package chokes on must not stop the mailbox
            self.kit.log.warning("email: UID %s cannot be read (%s: %s); not answered, left in %s", uid,
                                 type(exc).__name__, exc, s.imap_folder)
            return
        if size > s.max_message_bytes:
            mail = replace(mail, text=f"[A mail of {size} bytes arrived, over the {s.max_message_bytes} bytes "
                                      "this channel reads (channels.email.max_message_bytes); only its subject "
                                      f"is known: {mail.subject!r}.]", attachments=())
        why = self._never_answer(mail)
        if why:
            self.kit.log.info("email: UID %s not answered: %s", uid, why)
            return
        self.kit.store.kv_set(THREAD_KEY + mail.message_id,
                              json.dumps({"subject": mail.subject, "references": list(mail.references)}))
        self.kit.store.kv_set(LATEST_KEY + mail.sender.lower(), mail.message_id)
        await self.kit.receive(Incoming(
            message_id=mail.message_id, chat_id=mail.sender,
            sender=Sender(user_id=mail.sender, display=mail.display or None),
            private=True, text=approval_command(mail.text), addressed=True,
            files=tuple(_incoming_file(a) for a in mail.attachments),
            metadata={"message_id": mail.message_id, "subject": mail.subject},
        ))
        try:
            await box.mark(uid, b"\\Seen")
        except MailboxUnavailable:
            return  # only a courtesy for a person reading the same mailbox; the cursor is what counts

    def _never_answer(self, mail: MailIn) -> str | None:
        if mail.automatic:
            return mail.automatic
        if mail.untrusted:
            return f"the From is not believed: {mail.untrusted}"
        sender = Sender(user_id=mail.sender)
        # A stranger is never answered, not even once: with mail, the From can be anyone's address.
        verdict = decide(self.kit.policy, sender, private=True,
                         paired=self.kit.pairing.is_paired(self.name, mail.sender), refused_before=True)
        if verdict is Verdict.IGNORE:
            return f"{mail.sender} is not allowed (channels.email allow_from / owner / dm_policy)"
        return None

    # sending ----------------------------------------------------------------------------------
    def render(self, markdown: str) -> list[str]:
        """One mail holds any length: the Markdown stays whole (text part as is, HTML part rendered on send)."""
        return [markdown]

    async def send_text(self, target: Target, text: str) -> str:
        return await self._mail(target, text, target.reply_to)

    async def send_file(self, target: Target, name: str, data: bytes, caption: str) -> str:
        """The file as an attachment, in the thread of the sender's latest mail (a file is sent during a run,
        which answers that mail)."""
        parent = target.reply_to or self.kit.store.kv_get(LATEST_KEY + target.chat_id.lower())
        return await self._mail(target, caption or f"📎 {name}", parent, files=(OutFile(name, data),))

    async def _mail(self, target: Target, text: str, parent: str | None, files: tuple[OutFile, ...] = ()) -> str:
        s = self.settings
        thread = self.kit.store.kv_get(THREAD_KEY + parent) if parent else None
        if parent and thread is None:
            parent = None  # not a mail we read: start a new thread rather than point at an unknown id
        info = json.loads(thread) if thread else {}
        if "@" not in target.chat_id:
            raise DeliveryError(f"not an email address: {target.chat_id!r}", permanent=True)
        # An answer to one mail is recorded the moment the server took it, under a key of what it answers
        # and says (a mail answering none, e.g. a cron result: under its part's send_key): sent again after
        # a crash (the reply not yet marked delivered), it is not mailed twice; lost between "about to
        # send" and the server's OK, it goes out again with the same Message-ID, which mail clients show once.
        said = text + "".join(f"\n{f.name}\0{hashlib.sha256(f.data).hexdigest()}" for f in files)
        what = f"{parent}\n{said}" if parent else f"part {target.send_key}" if target.send_key else None
        key = OUT_KEY + hashlib.sha256(f"{target.chat_id}\n{what}".encode()).hexdigest()[:32] if what else None
        record = json.loads(self.kit.store.kv_get(key) or "null") if key else None
        if record and record.get("sent"):
            self.kit.log.info("email: %s was already sent as %s; not sent twice",
                              f"the answer to {parent}" if parent else f"part {target.send_key}", record["id"])
            return str(record["id"])
        message_id = record["id"] if record else new_message_id(s.address)
        if key:
            self.kit.store.kv_set(key, json.dumps({"id": message_id, "sent": False}))
        message = compose(sender=s.address, display_name=s.display_name, to=target.chat_id,
                          subject=info.get("subject") or s.subject, markdown=text, parent=parent,
                          references=tuple(info.get("references", ())), message_id=message_id, files=files)
        await send_mail(s, message)
        if key:
            self.kit.store.kv_set(key, json.dumps({"id": message_id, "sent": True}))
        return message_id

    def status(self) -> dict[str, Any]:
        box = self.mailbox
        return {"address": self.settings.address,
                "idle": bool(box and box.idle_supported)}


def _incoming_file(item: Attachment) -> IncomingFile:
    async def fetch() -> bytes:
        return item.data

    kind = "image" if item.mime.startswith("image/") else "file"
    return IncomingFile(name=item.name, size=len(item.data), mime=item.mime, fetch=fetch, kind=kind)  # type: ignore[arg-type]


__all__ = ["EmailAdapter", "approval_command"]
