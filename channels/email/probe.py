"""`clawgate doctor`'s email probe: the IMAP log-in and folder the adapter uses, then SMTP EHLO and
(when a login is configured) AUTH, each with the client library the channel sends and reads with.

Nothing is read, marked or sent: the folder is selected and the connections are closed again.
"""

from __future__ import annotations

import ssl

import aiosmtplib

from clawgate.channels.kit.probe import ProbeResult, logged_in, unreachable

from .imap import Mailbox, MailboxAuthError, MailboxUnavailable
from .settings import EmailSettings

SMTP_CREDENTIALS = "channels.email.smtp_username / smtp_password (or username / password)"


async def probe(settings: EmailSettings) -> ProbeResult:
    s = settings
    missing = [key for key in ("address", "imap_host", "password") if not getattr(s, key)]
    if missing:
        return ProbeResult("fail", f"channels.email needs {', '.join(missing)}",
                           "set them in [channels.email] (or CLAWGATE_CHANNELS__EMAIL__<KEY>)")
    imap = f"IMAP {s.imap_host}:{s.imap_server_port}"
    box = Mailbox(s)
    try:
        await box.connect()
    except MailboxAuthError as exc:  # refused credentials, an untrusted certificate or an unreadable ca_file
        text = str(exc)
        fix = ("fix the server's certificate, or set channels.email.ca_file to its CA" if "certificate" in text
               or "ca_file" in text else "set channels.email.username / password (most providers need an app password)")
        return ProbeResult("fail", f"{imap}: {text.split(';')[0].split(': fix')[0]}", fix)
    except MailboxUnavailable as exc:
        return unreachable("the IMAP server", f"{s.imap_host}:{s.imap_server_port}", str(exc),
                           "channels.email.imap_host / imap_port / imap_tls")
    finally:
        await box.disconnect()
    sent = await _smtp(s)
    if sent.status != "ok":
        return sent
    return logged_in(f"{imap} logged in as {s.login} ({s.imap_folder}); {sent.detail}")


async def _smtp(s: EmailSettings) -> ProbeResult:
    where = f"{s.smtp_server}:{s.smtp_server_port}"
    login = s.smtp_login
    try:
        context = s.tls_context() if s.smtp_tls != "none" else None
    except ValueError as exc:
        return ProbeResult("fail", str(exc))
    client = aiosmtplib.SMTP(hostname=s.smtp_server, port=s.smtp_server_port, use_tls=s.smtp_tls == "tls",
                             start_tls=s.smtp_tls == "starttls", tls_context=context, timeout=s.timeout_seconds)
    try:
        await client.connect()  # EHLO, and STARTTLS when configured
        if login is not None:
            await client.login(*login)
    except ssl.SSLCertVerificationError as exc:
        return ProbeResult("fail", f"SMTP {where}: the certificate is not trusted ({exc.verify_message})",
                           "fix the server's certificate, or set channels.email.ca_file to its CA")
    except aiosmtplib.SMTPAuthenticationError as exc:
        return ProbeResult("fail", f"SMTP {where} refused the login ({exc.code})",
                           f"set {SMTP_CREDENTIALS}; most providers need an app password")
    except aiosmtplib.SMTPException as exc:
        if login is not None and "AUTH" in str(exc) and "not supported" in str(exc):
            return ProbeResult("fail", f"SMTP {where} offers no login (AUTH) but a password is set",
                               "send without a login to this relay (see docs/email.md)")
        return unreachable("the SMTP server", where, f"{type(exc).__name__}: {exc}",
                           "channels.email.smtp_host / smtp_port / smtp_tls")
    except OSError as exc:
        return unreachable("the SMTP server", where, f"{type(exc).__name__}: {exc}",
                           "channels.email.smtp_host / smtp_port / smtp_tls")
    finally:
        if client.is_connected:
            try:
                await client.quit()
            except (aiosmtplib.SMTPException, OSError):
                client.close()
    how = f"logged in as {login[0]}" if login is not None else "no login (relay)"
    return logged_in(f"SMTP {where} EHLO ok, {how}")
