"""One outgoing mail: threading headers, "Re:" once, text/plain + text/html from Markdown, attachments.

The text part is the Markdown as plain text (kit.markdown.to_plain: escapes resolved, marks gone, link
targets in parentheses); the HTML part is the Markdown rendered, raw HTML in it escaped.

Why `Auto-Submitted: auto-replied` on every mail: the bot's mail is machine-written, and a well-behaved
auto-responder (vacation notice, another bot) reads that header and does not answer it (RFC 3834),
which is the other half of loop protection (message.automatic_reason is ours).
"""

from __future__ import annotations

import mimetypes
import re
from dataclasses import dataclass
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from markdown_it import MarkdownIt

from clawgate.channels.kit.markdown import to_plain

from .identity import clean_header_text

_RE = re.compile(r"^\s*((re|aw|sv|antw|vs)\s*(\[\d+\])?\s*:\s*)+", re.IGNORECASE)
MAX_REFERENCES = 20  # long threads: the first and the latest ids are what mail clients thread by
# CommonMark with tables and strikethrough; raw HTML in the Markdown is escaped, never passed through.
_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])

HTML_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"></head>
<body style="font-family: sans-serif; line-height: 1.4">
{body}</body></html>
"""


@dataclass(frozen=True)
class OutFile:
    name: str
    data: bytes
    mime: str | None = None


def new_message_id(sender: str) -> str:
    return make_msgid(domain=sender.partition("@")[2] or None)


def reply_subject(subject: str) -> str:
    """"Re: " exactly once in front of the original subject ("Re: Re: AW: x" -> "Re: x")."""
    bare = _RE.sub("", subject).strip()
    return f"Re: {bare}" if bare else "Re:"


def render_html(markdown: str) -> str:
    return HTML_PAGE.format(body=_MARKDOWN.render(markdown))


def references_for(references: tuple[str, ...] | list[str], parent: str | None) -> list[str]:
    chain = [ref for ref in references if ref != parent]
    if parent:
        chain.append(parent)
    if len(chain) > MAX_REFERENCES:
        chain = chain[:1] + chain[-(MAX_REFERENCES - 1):]
    return chain


def compose(*, sender: str, display_name: str, to: str, subject: str, markdown: str,
            parent: str | None = None, references: tuple[str, ...] | list[str] = (),
            files: tuple[OutFile, ...] = (), message_id: str | None = None) -> EmailMessage:
    """The mail answering `parent` (its Message-ID) in its thread, or a new thread when parent is None."""
    msg = EmailMessage()
    local, _, domain = sender.partition("@")
    msg["From"] = Address(display_name=display_name, username=local, domain=domain) if display_name else sender
    msg["To"] = to
    # the subject may be an incoming mail's: a CR or LF in it would make the header (and the answer) fail
    msg["Subject"] = reply_subject(clean_header_text(subject)) if parent else clean_header_text(subject)
    msg["Date"] = formatdate(localtime=False, usegmt=True)
    msg["Message-ID"] = message_id or new_message_id(sender)
    if parent:
        msg["In-Reply-To"] = parent
        msg["References"] = " ".join(references_for(references, parent))
    msg["Auto-Submitted"] = "auto-replied"
    msg["X-Auto-Response-Suppress"] = "All"  # Exchange/Outlook: no out-of-office answers to us
    plain = to_plain(markdown)  # the text part reads as text: no Markdown escapes or marks
    msg.set_content(plain + "\n")
    msg.add_alternative(render_html(markdown), subtype="html")
    for item in files:
        mime = item.mime or mimetypes.guess_type(item.name)[0] or "application/octet-stream"
        maintype, _, subtype = mime.partition("/")
        msg.add_attachment(item.data, maintype=maintype, subtype=subtype or "octet-stream", filename=item.name)
    return msg
