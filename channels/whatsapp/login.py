"""`clawgate channels login whatsapp [--account NAME] [--phone NUMBER]`: link clawgate as a device.

whatsmeow connects without a session, WhatsApp's server sends pairing references, and neonize's QR
callback gets each code in turn (a new one about every 20 s): shown here as a terminal QR code (segno,
which neonize itself depends on) for WhatsApp → Linked devices → Link a device. With `--phone`, the
pairing code WhatsApp returns for that number is shown instead, to type under "Link with phone number".
Once the phone confirms (PairStatusEv) and the session is up (ConnectedEv) the session database is
left in state/whatsapp/<account>/ (0600) and the daemon uses it from its next start.

A gateway client (the web page, gateway/device_links.py) passes `qr` (each QR code handed to it as text:
it draws its own image) or, with a number, `pairing` (the pairing code handed to it); a device already
linked is then an error rather than a line. The number is checked (E.164) before anything connects.
Waiting ends after `wait_seconds`: the login's connection is closed, so the code cannot link any more
(it expired) and the owner asks for a new one.
"""

from __future__ import annotations

import asyncio
import io
import re
import threading
from typing import Any, Callable

from clawgate.channels.kit import ChannelAuthError, ChannelUnavailable
from clawgate.channels.whatsapp.linked_client import (
    NeonizeMissing,
    open_client,
    prepare_session_dir,
    session_path,
    stored_device,
)
from clawgate.config.paths import Paths

LINK_WAIT_SECONDS = 180.0  # WhatsApp stops offering codes after about two minutes


def qr_text(code: str) -> str:
    """The code as a QR code in block characters (two rows a line), for a phone to scan from the terminal."""
    import segno

    out = io.StringIO()
    segno.make(code, error="l").terminal(out=out, compact=True)
    return out.getvalue()


# E.164: a country code (never starting with 0) and the number, 15 digits at most; the shortest in use have 7.
_E164 = re.compile(r"[1-9][0-9]{6,14}")


def phone_digits(phone: str) -> str:
    """The number as WhatsApp's pairing wants it (E.164 digits, no "+"); written as people write numbers
    ("+1 (555) 123-4567") is fine. Anything else is one line naming the form expected."""
    spaced = phone.strip()
    digits = re.sub(r"[\s\-().]", "", spaced.removeprefix("+"))
    if not _E164.fullmatch(digits):
        why = ("starts with 0: write the country code instead of the leading 0"
               if digits.startswith("0") else "is not a phone number in international form")
        raise ChannelAuthError(f"WhatsApp: {phone[:40]!r} {why}, as +15551234567 (the country code, then "
                               "the number: 7 to 15 digits)")
    return digits


async def link(show: Callable[[str], None], account: str = "default", phone: str | None = None,
               qr: Callable[[str], None] | None = None, pairing: Callable[[str], None] | None = None,
               wait_seconds: float = LINK_WAIT_SECONDS) -> str:
    digits = phone_digits(phone) if phone else None  # before anything is touched: a bad number is one line
    client_side = qr is not None or pairing is not None  # a gateway client shows the codes
    path = session_path(Paths.from_env().state, account)
    prepare_session_dir(path)
    linked = await asyncio.to_thread(stored_device, path)
    if linked is not None:
        line = (f"WhatsApp: already linked as {linked} ({path}); to link another phone, unlink this device on "
                f"the phone (Linked devices) or remove {path.parent}, then link again")
        if client_side:
            raise ChannelAuthError(line)
        return line
    try:
        client = open_client(path, f"clawgate-login-{account}")
    except NeonizeMissing as exc:
        raise ChannelAuthError(f"WhatsApp: {exc}") from None
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[str] = loop.create_future()
    shown_code = threading.Event()

    def settle(result: str | BaseException) -> None:
        def apply() -> None:
            if not outcome.done():
                outcome.set_exception(result) if isinstance(result, BaseException) else outcome.set_result(result)
        loop.call_soon_threadsafe(apply)

    def on_qr(_client: Any, code: bytes) -> None:
        if digits is None and qr is not None:
            loop.call_soon_threadsafe(qr, code.decode())
        elif digits is None:
            loop.call_soon_threadsafe(show, "Scan with WhatsApp → Settings → Linked devices → Link a device:\n"
                                      + qr_text(code.decode()))
        elif not shown_code.is_set():  # the server is ready: ask for a pairing code for the number
            shown_code.set()
            threading.Thread(target=pair_phone, args=(digits,), daemon=True).start()  # not on neonize's thread

    def pair_phone(number: str) -> None:
        try:
            code = client.PairPhone(number, True)
        except Exception as exc:
            settle(ChannelAuthError(f"WhatsApp refused a pairing code for {number}: {exc}"))
            return
        if pairing is not None:
            loop.call_soon_threadsafe(pairing, code)
        else:
            loop.call_soon_threadsafe(show, f"On the phone: WhatsApp → Linked devices → Link a device → Link with "
                                      f"phone number instead, and type {code}")

    def on_pair(_client: Any, event: Any) -> None:
        if event.Error:
            settle(ChannelAuthError(f"WhatsApp: linking failed: {event.Error}"))

    def on_connected(_client: Any, _event: Any) -> None:
        me = getattr(client, "me", None) or client.get_me()
        settle(f"{me.JID.User}")

    from neonize.events import ConnectedEv, PairStatusEv

    client.event.qr(on_qr)
    client.event(PairStatusEv)(on_pair)
    client.event(ConnectedEv)(on_connected)

    def session() -> None:
        try:
            client.connect()
        except Exception as exc:
            settle(ChannelUnavailable(f"WhatsApp cannot be reached to link a device: {exc}"))
        else:
            settle(ChannelUnavailable("WhatsApp ended the connection before a phone linked this device"))

    thread = threading.Thread(target=session, name=f"whatsapp-login-{account}", daemon=True)
    thread.start()
    try:
        number = await asyncio.wait_for(outcome, wait_seconds)
    except asyncio.TimeoutError:
        what = "the pairing code" if digits else "the QR codes"
        again = "ask for a new one" if client_side else "run the command again"
        raise ChannelUnavailable(f"WhatsApp: {what} expired: no phone linked this device within "
                                 f"{wait_seconds:.0f} s; {again}") from None
    finally:
        await asyncio.to_thread(client.stop)
        await asyncio.to_thread(thread.join, 10)
        prepare_session_dir(path)
    which = "" if account == "default" else f" (account {account})"
    if client_side:
        return f"WhatsApp linked as +{number}{which}"
    return (f"WhatsApp linked as {number}{which}; the session is in {path}. Put mode = \"linked\" and your "
            f"number in owner in [channels.whatsapp], then start the daemon")


__all__ = ["LINK_WAIT_SECONDS", "link", "phone_digits", "qr_text"]
