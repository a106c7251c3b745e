"""One incoming mail, read: who sent it, what they wrote (without quoted history and signature),
how it threads, what it carries, and whether it must never be answered.

Why the "never answer" rules live here, in one function: a bot that answers an auto-reply, a bounce
or a mailing list starts a mail loop or sprays backscatter at forged senders. RFC 3834 says an
automatic responder must not answer `Auto-Submitted` mail, bounces (null return path, delivery
reports) or list traffic; `Precedence: bulk/junk/list` is the older form of the same signal.
"""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import dataclass
from email.message import EmailMessage

from mailparser_reply import EmailReplyParser

from clawgate.agent.tools.web import html_to_text

from .identity import FromAddress, canonical_address, clean_header_text, dmarc_problem, read_from

# Quote headers ("On … wrote:") and signatures are recognised in these languages.
REPLY_LANGUAGES = ["en", "de", "fr", "es", "it", "nl", "pl", "sv", "da", "cs"]
_ID = re.compile(r"<[!-;=?-~]+>")  # printable ASCII only: an id goes back out in our References
_NULL_SENDERS = ("mailer-daemon", "postmaster")


@dataclass(frozen=True)
class Attachment:
    name: str
    mime: str
    data: bytes


@dataclass(frozen=True)
class MailIn:
    """What the adapter needs from one message; `automatic` is the reason it must not be answered."""

    message_id: str                 # "<id@host>", as in the header (a synthetic one when it had none)
    sender: str                     # the From address, canonical (identity.canonical_address); replies go here only
    display: str                    # the From display name, cleaned for headers
    subject: str                    # cleaned for headers: no CR, LF or other control characters
    text: str                       # the new part of the body: quoted history and signature removed
    references: tuple[str, ...]     # the thread so far (References, then In-Reply-To), oldest first
    attachments: tuple[Attachment, ...]
    automatic: str | None           # e.g. "Auto-Submitted: auto-replied"; None: a person wrote it
    untrusted: str | None           # why the From names nobody for sure (identity.read_from), or why the
                                    # configured server did not confirm it (dmarc_problem); None: trusted


def parse_bytes(raw: bytes) -> EmailMessage:
    return email.message_from_bytes(raw, policy=email.policy.default)  # type: ignore[return-value]


def message_ids(value: str | None) -> list[str]:
    return _ID.findall(value or "")


def automatic_reason(msg: EmailMessage, own_address: str, sender: FromAddress | None = None) -> str | None:
    """Why this message is machine-sent or list mail (never answered), or None for a person's mail."""
    auto = str(msg.get("Auto-Submitted", "")).strip().lower()
    if auto and not auto.startswith("no"):
        return f"Auto-Submitted: {auto}"
    precedence = str(msg.get("Precedence", "")).strip().lower()
    if precedence in ("bulk", "junk", "list", "auto_reply"):
        return f"Precedence: {precedence}"
    for header in ("List-Id", "List-Unsubscribe", "List-Post", "X-Autoreply", "X-Autorespond",
                   "X-Auto-Response-Suppress-Reply"):
        if msg.get(header) is not None:
            return f"{header} present"
    if str(msg.get("Return-Path", "")).strip() == "<>":
        return "null return path (a bounce)"
    if msg.get_content_type() == "multipart/report":
        return "delivery or read report"
    address = (sender or read_from(msg)).address
    if not address or "@" not in address:
        return "no usable From address"
    if address.split("@", 1)[0] in _NULL_SENDERS:
        return f"sent by {address}"
    if address == canonical_address(own_address):
        return "sent by this address itself"
    return None


def trust_problem(msg: EmailMessage, sender: FromAddress, authserv_id: str) -> str | None:
    """Why the From of this mail is not to be believed (never answered), or None. Without `authserv_id`
    only the header's own soundness is checked (docs/email.md: From-trust)."""
    if sender.problem:
        return sender.problem
    if not authserv_id:
        return None
    problem = dmarc_problem(msg, authserv_id, sender.address.rpartition("@")[2])
    return f"{sender.address}: {problem}" if problem else None


def new_text(body: str) -> str:
    """The part the sender just wrote: quoted history ("On … wrote:", "> …") and signature dropped."""
    if not body.strip():
        return ""
    replies = EmailReplyParser(languages=REPLY_LANGUAGES).read(body).replies
    if not replies:
        return body.strip()
    first = replies[0].body.strip()
    return first if first else "\n".join(line for line in body.splitlines() if not line.startswith(">")).strip()


def _body(msg: EmailMessage) -> str:
    part = msg.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except (LookupError, ValueError):  # an unknown charset: read it as latin-1 rather than lose it
        payload = part.get_payload(decode=True)
        content = payload.decode("latin-1") if isinstance(payload, bytes) else ""
    if part.get_content_type() == "text/html":
        return html_to_text(content)
    return str(content).replace("\r\n", "\n")


def _attachments(msg: EmailMessage) -> tuple[Attachment, ...]:
    found: list[Attachment] = []
    for part in msg.iter_attachments():
        data = part.get_payload(decode=True)
        if not isinstance(data, bytes):
            continue
        found.append(Attachment(part.get_filename() or "attachment", part.get_content_type(), data))
    return tuple(found)


def read_mail(raw: bytes, *, own_address: str, authserv_id: str = "", fallback_id: str = "") -> MailIn:
    """Parse one message as fetched from IMAP."""
    msg = parse_bytes(raw)
    sender = read_from(msg)
    ids = message_ids(str(msg.get("Message-ID", "")))
    references = message_ids(str(msg.get("References", "")))
    for parent in message_ids(str(msg.get("In-Reply-To", ""))):
        if parent not in references:
            references.append(parent)
    return MailIn(
        message_id=ids[0] if ids else f"<{fallback_id or 'unknown'}@clawgate.invalid>",
        sender=sender.address, display=sender.display, subject=clean_header_text(str(msg.get("Subject", ""))),
        text=new_text(_body(msg)), references=tuple(references), attachments=_attachments(msg),
        automatic=automatic_reason(msg, own_address, sender),
        untrusted=trust_problem(msg, sender, authserv_id),
    )

