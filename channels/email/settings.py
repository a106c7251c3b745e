"""`[channels.email]`: the mailbox the bot reads (IMAP) and the server it sends through (SMTP)."""

from __future__ import annotations

import ipaddress
import ssl
from typing import Literal

from pydantic import Field, field_validator, model_validator

from clawgate.config.access import AccessSettings, DmPolicy

from .identity import canonical_address

Security = Literal["tls", "starttls", "none"]
IMAP_PORTS = {"tls": 993, "starttls": 143, "none": 143}
SMTP_PORTS = {"tls": 465, "starttls": 587, "none": 25}


def is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class EmailSettings(AccessSettings):
    """The kit's access keys (owner, allow_from, dm_policy, max_file_bytes, ...) plus the mailbox's.
    `enabled` None: on when imap_host and address are set."""

    # A stranger is never answered by default: with "pairing" anyone could make the agent mail a code
    # to any address they put in From.
    dm_policy: DmPolicy = "allowlist"
    address: str = Field("", description="the bot's own address: the From of its mail, never answered itself")
    display_name: str = Field("", description="shown beside the address in the recipient's mail client")
    username: str = Field("", description="IMAP (and by default SMTP) login; empty: the address")
    password: str = Field("", description="IMAP (and by default SMTP) password; an app password with most providers")
    imap_host: str = ""
    imap_port: int | None = Field(None, ge=1, le=65535, description="default: 993 for tls, 143 otherwise")
    imap_tls: Security = "tls"
    imap_folder: str = "INBOX"
    smtp_host: str = Field("", description="default: imap_host")
    smtp_port: int | None = Field(None, ge=1, le=65535, description="default: 465 for tls, 587 for starttls, 25 for none")
    smtp_tls: Security = "starttls"
    smtp_auth: bool = Field(True, description=(
        "log in to the SMTP server (AUTH); false for a relay that takes mail without login (a local MTA)"))
    smtp_username: str = Field("", description="default: username")
    smtp_password: str = Field("", description="default: password")
    ca_file: str = Field("", description=(
        "PEM file of certificate authorities to trust besides the system's (a mail server with its own CA)"))
    subject: str = Field("Message from your assistant", description="subject of mail that starts a new thread")
    poll_seconds: float = Field(60.0, gt=0, description="how often to look for mail when the server has no IDLE")
    idle_seconds: float = Field(60.0, gt=0, le=1740, description=(
        "IDLE is ended and the folder checked this often: servers drop IDLE at 30 min, and a push the "
        "server missed costs at most this long"))
    timeout_seconds: float = Field(30.0, gt=0, description="one IMAP or SMTP command's deadline")
    max_message_bytes: int = Field(25 * 1024 * 1024, ge=1024, description=(
        "a larger incoming mail is not downloaded: the agent is told its sender, subject and size only"))
    authserv_id: str = Field("", description=(
        "the id your receiving server writes in its Authentication-Results header: when set, a mail counts "
        "as from its From address only when the topmost such header says dmarc=pass for the From domain; "
        "other mail is not answered. Unset, the From address can be forged and owner rights by mail rest on it"))

    @field_validator("owner", "allow_from", mode="after")
    @classmethod
    def _addresses_as_mail_is_read(cls, entries: list[str]) -> list[str]:
        """Spelled as incoming From addresses are (lower case, IDNA domain): `Owner@Exämple.test` matches
        mail from owner@xn--exmple-cua.test."""
        return [canonical_address(entry) if "@" in entry else entry for entry in entries]

    @model_validator(mode="after")
    def _plain_only_on_loopback(self) -> "EmailSettings":
        for kind, host, security in (("imap", self.imap_host, self.imap_tls), ("smtp", self.smtp_server, self.smtp_tls)):
            if security == "none" and host and not is_loopback(host):
                raise ValueError(f"{kind}_tls = \"none\" sends the password in clear text; it is allowed only for a "
                                 f"loopback host, not {host!r}: use \"tls\" or \"starttls\"")
        return self

    def tls_context(self) -> ssl.SSLContext:
        """Certificates are always verified; `ca_file` adds authorities, it never turns checking off."""
        context = ssl.create_default_context()
        if self.ca_file:
            try:
                context.load_verify_locations(cafile=self.ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(f"channels.email.ca_file {self.ca_file!r} cannot be read as PEM certificates "
                                 f"({exc}); fix the path or remove the setting") from None
        return context

    @property
    def active(self) -> bool:
        return bool(self.enabled) if self.enabled is not None else bool(self.imap_host and self.address)

    @property
    def login(self) -> str:
        return self.username or self.address

    @property
    def imap_server_port(self) -> int:
        return self.imap_port or IMAP_PORTS[self.imap_tls]

    @property
    def smtp_server(self) -> str:
        return self.smtp_host or self.imap_host

    @property
    def smtp_server_port(self) -> int:
        return self.smtp_port or SMTP_PORTS[self.smtp_tls]

    @property
    def smtp_login(self) -> tuple[str, str] | None:
        """(user, password) for SMTP AUTH, or None to send without logging in (smtp_auth = false: a relay)."""
        if not self.smtp_auth:
            return None
        return (self.smtp_username or self.login, self.smtp_password or self.password)
