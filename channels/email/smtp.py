"""Sending one mail through the configured SMTP server (aiosmtplib: TLS, STARTTLS, AUTH).

Whether to log in is the `smtp_auth` setting, never guessed from a password being set (the IMAP
password always is): a local relay takes mail without AUTH, a provider refuses mail without it.

Errors are sorted the way delivery retries need: a 5xx answer (bad recipient, message refused) or a
refused login is permanent and never retried; a 4xx answer, a timeout or an unreachable server is
transient and retried with backoff.
"""

from __future__ import annotations

import ssl
from email.message import EmailMessage

import aiosmtplib

from clawgate.channels.base import DeliveryError

from .settings import EmailSettings


async def send_mail(settings: EmailSettings, message: EmailMessage, *, ssl_context: ssl.SSLContext | None = None) -> None:
    """Hand `message` to the SMTP server; DeliveryError(permanent=...) when it is not accepted."""
    login = settings.smtp_login
    mode = settings.smtp_tls
    try:
        context = (ssl_context or settings.tls_context()) if mode != "none" else None
    except ValueError as exc:
        raise DeliveryError(str(exc), permanent=True, channel_down=True) from None
    client = aiosmtplib.SMTP(hostname=settings.smtp_server, port=settings.smtp_server_port, use_tls=mode == "tls",
                             start_tls=mode == "starttls", tls_context=context, timeout=settings.timeout_seconds)
    try:
        async with client:
            if login is not None:
                if client.is_ehlo_or_helo_needed:
                    await client.ehlo()
                if not client.supports_extension("auth"):
                    raise DeliveryError(
                        f"the SMTP server {settings.smtp_server}:{settings.smtp_server_port} offers no login (AUTH); "
                        "for a relay that takes mail without one set channels.email.smtp_auth = false", permanent=True,
                        channel_down=True)
                await client.login(*login)
            await client.send_message(message)
    except ssl.SSLCertVerificationError as exc:
        raise DeliveryError(f"the SMTP server's certificate is not trusted ({exc.verify_message}): fix the server's "
                            "certificate, or set channels.email.ca_file to its CA", permanent=True,
                            channel_down=True) from exc
    except aiosmtplib.SMTPAuthenticationError as exc:
        raise DeliveryError(f"the SMTP server refused the login ({exc.code}); check channels.email.smtp_username / "
                            "smtp_password (or username / password; most providers need an app password)",
                            permanent=True, channel_down=True) from exc
    except aiosmtplib.SMTPRecipientsRefused as exc:
        codes = {r.code for r in exc.recipients}
        raise DeliveryError(f"the SMTP server refused the recipient ({', '.join(map(str, sorted(codes)))})",
                            permanent=all(code >= 500 for code in codes)) from exc
    except aiosmtplib.SMTPResponseException as exc:
        if exc.code == 530 and login is None:
            raise DeliveryError(f"the SMTP server wants a login ({exc.code} {exc.message}); set channels.email.smtp_auth "
                                "= true (the default) with smtp_username / smtp_password", permanent=True,
                                channel_down=True) from exc
        raise DeliveryError(f"the SMTP server answered {exc.code}: {exc.message}", permanent=exc.code >= 500) from exc
    except (aiosmtplib.SMTPException, OSError) as exc:
        raise DeliveryError(f"cannot send through {settings.smtp_server}:{settings.smtp_server_port}: "
                            f"{type(exc).__name__}: {exc}") from exc
