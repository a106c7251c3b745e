"""`clawgate channels login whatsapp [--account NAME] [--phone NUMBER]`: link clawgate as a device.

whatsmeow connects without a session, WhatsApp's server sends pairing references, and neonize's QR
callback gets each code in turn (a new one about every 20 s): shown here as a terminal QR code (segno,
which neonize itself depends on) for WhatsApp → Linked devices → Link a device. With `--phone`, the
pairing code WhatsApp returns for that number is shown instead, to type under "Link with phone number".
Once the phone confirms (PairStatusEv) and the session is up (ConnectedEv) the session database is
left in state/whatsapp/<account>/ (0600) and the daemon uses it from its next start.

A gateway client (the web page, gateway/device_links.py) passes `qr`: each code is handed to it as
text instead (it draws its own image), and a device already linked is an error rather than a line.
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


def phone_digits(phone: str) -> str:
    digits = re.sub(r"[\s\-().+]", "", phone)
    if not digits.isdigit() or len(digits) < 7:
        raise ChannelAuthError(f"WhatsApp: --phone {phone!r} is not a phone number: write it with its country "
                               "code, as +15551234567")
    return digits


async def link(show: Callable[[str], None], account: str = "default", phone: str | None = None,
               qr: Callable[[str], None] | None = None) -> str:
    path = session_path(Paths.from_env().state, account)
    prepare_session_dir(path)
    linked = await asyncio.to_thread(stored_device, path)
    if linked is not None:
        line = (f"WhatsApp: already linked as {linked} ({path}); to link another phone, unlink this device on "
                f"the phone (Linked devices) or remove {path.parent}, then link again")
        if qr is not None:
            raise ChannelAuthError(line)
        return line
    digits = phone_digits(phone) if phone else None
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
            pairing = client.PairPhone(number, True)
        except Exception as exc:
            settle(ChannelAuthError(f"WhatsApp refused a pairing code for {number}: {exc}"))
            return
        loop.call_soon_threadsafe(show, f"On the phone: WhatsApp → Linked devices → Link a device → Link with "
                                  f"phone number instead, and type {pairing}")

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
        number = await asyncio.wait_for(outcome, LINK_WAIT_SECONDS)
    except asyncio.TimeoutError:
        raise ChannelUnavailable(f"WhatsApp: no phone linked this device within {LINK_WAIT_SECONDS:.0f} s; "
                                 "run the command again") from None
    finally:
        await asyncio.to_thread(client.stop)
        await asyncio.to_thread(thread.join, 10)
        prepare_session_dir(path)
    which = "" if account == "default" else f" (account {account})"
    if qr is not None:
        return f"WhatsApp linked as +{number}{which}"
    return (f"WhatsApp linked as {number}{which}; the session is in {path}. Put mode = \"linked\" and your "
            f"number in owner in [channels.whatsapp], then start the daemon")


__all__ = ["LINK_WAIT_SECONDS", "link", "phone_digits", "qr_text"]
