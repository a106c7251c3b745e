"""Linking a chat platform's device from a gateway client: the web page's "Link" for WhatsApp (linked mode).

`channels.link` runs the adapter's own `login` (the pairing `clawgate channels login` does) inside the
daemon and hands each QR code to the one connection that asked, as an `link` event carrying an SVG drawn
here with segno (a `data:` URI the page shows as an image; an SVG in an <img> runs nothing). WhatsApp
rotates the code about every 20 s: each new one is a new event. With a phone number instead, WhatsApp's
8-character pairing code (neonize's PairPhone, asked by the same login) comes as one `code` event, to be
typed on the phone. The last event says "linked" (and whether the account's channel was started again,
so no restart is needed) or gives the error line (a code that expired says so: the page asks again).

Who may: only clients that authenticated with the gateway token reach any method, and they are the
owner; a QR code links a device to the owner's WhatsApp account, so it goes to the caller alone (never
broadcast to other clients) and is never logged; so is a pairing code. A link that cannot work (an account
not in linked mode, a number that is not one) is refused at once, before anything connects, by the
adapter's own `link_check`. One pairing per account at a time; closing the connection, or
`channels.link.cancel` from it, stops it (the login's client is stopped with it; cancel answers once it is).
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from clawgate.agent.core.errors import Conflict, DomainError, NotFound
from clawgate.config.schema import ChannelSettings

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger(__name__)
EVENT = "link"
STOP_SECONDS = 15.0  # a cancelled login stops its client and joins its thread (10 s at most) before cancel answers


class InvalidLink(DomainError):
    code = "invalid_params"


def qr_image(code: str) -> str:
    """The code as an SVG QR code in a data: URI (dark on white, a quiet zone, sized for a phone to scan)."""
    import segno

    return str(segno.make(code, error="l").svg_data_uri(scale=6, border=4))


@dataclass
class _Pairing:
    conn: "Connection"
    task: "asyncio.Task[None]"


class DeviceLinks:
    """The pairings running now, by the account's channel name ("whatsapp", "whatsapp.work")."""

    def __init__(self, settings: ChannelSettings) -> None:
        self.settings = settings
        self.runners: Mapping[str, Any] = {}  # the chat channels' runners, set once they are built (app.py)
        self._pairings: dict[str, _Pairing] = {}

    async def start(self, conn: "Connection", channel: str, account: str, phone: str | None = None) -> dict[str, Any]:
        """Start a pairing for this client. A link that cannot work is refused first; the same client asking
        again (a phone-number code instead of the QR codes) replaces its own pairing, another client's never."""
        name = channel if account == "default" else f"{channel}.{account}"
        login, model = self._login(channel, account, phone)
        found = self._pairings.get(name)
        if found is not None and found.conn is conn:  # this page switches: its pairing stops first
            self._stop(name, conn)
            await asyncio.wait([found.task], timeout=STOP_SECONDS)
        if name in self._pairings:
            raise Conflict(f"{name} is already being linked (from another page): close that one or wait for it")
        if phone is None and importlib.util.find_spec("segno") is None:  # before WhatsApp is asked
            raise InvalidLink(f"drawing the QR code needs segno: pip install 'clawgate[{channel}]' "
                              "(the signal and whatsapp-linked extras bring it)")
        extra: dict[str, Any] = {"account": account} if "account" in inspect.signature(login).parameters else {}
        if phone is not None:
            extra["phone"] = phone
        task = asyncio.create_task(self._run(conn, name, login, model, extra), name=f"link:{name}")
        self._pairings[name] = _Pairing(conn, task)
        conn.on_close.append(lambda: self._stop(name, conn))
        log.info("linking %s: started by a gateway client%s", name,  # never the codes
                 " (a pairing code for a phone number)" if phone is not None else "")
        return {"channel": name, "state": "started"}

    async def cancel(self, conn: "Connection", channel: str, account: str) -> dict[str, Any]:
        """Stop this client's pairing; answered once its login client is closed, so the same client may
        start another (a phone-number code instead of the QR codes) at once."""
        name = channel if account == "default" else f"{channel}.{account}"
        found = self._pairings.get(name)
        if found is None:
            raise NotFound(f"{name} is not being linked")
        if found.conn is not conn:
            raise Conflict(f"{name} is being linked from another page; only that page can cancel it")
        self._stop(name, conn)
        await asyncio.wait([found.task], timeout=STOP_SECONDS)
        return {"channel": name, "state": "cancelled"}

    async def close(self) -> None:
        tasks = [p.task for p in self._pairings.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _stop(self, name: str, conn: "Connection") -> None:
        found = self._pairings.get(name)
        if found is not None and found.conn is conn and not found.task.done():
            found.task.cancel()
            log.info("linking %s: cancelled", name)

    def _login(self, channel: str, account: str, phone: str | None) -> tuple[Callable[..., Any], Any]:
        """The adapter's `login` (one that can hand QR codes over as text, or a pairing code for `phone`) and
        the account's settings, once the adapter's `link_check` found nothing to refuse."""
        from clawgate.channels.kit import ChannelAuthError
        from clawgate.channels.kit.registry import ChannelConfigError, accounts, load, validate

        table = self.settings.sections().get(channel)
        if table is None:
            raise NotFound(f"no [channels.{channel}] section in config.toml")
        try:
            cls = load(channel)
            found = {a.account: model for a, model in accounts(cls, channel, table)}
            model = found.get(account) or (validate(cls, channel, table) if account == "default" else None)
        except ChannelConfigError as exc:
            raise InvalidLink(str(exc)) from None
        if model is None:
            raise NotFound(f"channel {channel} has no account {account}: add [channels.{channel}.accounts.{account}]")
        login = getattr(cls, "login", None)
        if login is None or "qr" not in inspect.signature(login).parameters:
            raise InvalidLink(f"channel {channel} links no device by QR code here: set it up as docs/{channel}.md says")
        if phone is not None and "pairing" not in inspect.signature(login).parameters:
            raise InvalidLink(f"channel {channel} links no device by phone number: link it with its QR code")
        check = getattr(cls, "link_check", None)
        if check is not None:
            try:
                check(model, phone)
            except ChannelAuthError as exc:
                raise InvalidLink(str(exc)) from None
        return login, model

    async def _run(self, conn: "Connection", name: str, login: Callable[..., Any], model: Any,
                   extra: dict[str, Any]) -> None:
        from clawgate.channels.kit import ChannelAuthError, ChannelUnavailable

        def emit(state: str, **more: Any) -> None:
            conn.event(EVENT, {"channel": name, "state": state, **more})

        if "phone" in extra:  # the pairing code as WhatsApp formats it (ABCD-EFGH), typed on the phone
            extra["pairing"] = lambda code: emit("code", code=code)
        else:
            extra["qr"] = lambda code: emit("qr", image=qr_image(code))
        try:
            line = await login(model, lambda text: emit("line", text=text), **extra)
        except (ChannelAuthError, ChannelUnavailable) as exc:
            log.info("linking %s: %s", name, exc)
            emit("error", text=str(exc))
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug in the adapter: one line to the page, the daemon goes on
            log.error("linking %s failed: %s", name, type(exc).__name__)
            emit("error", text=f"linking failed ({type(exc).__name__}); see the daemon's log")
            return
        finally:
            found = self._pairings.get(name)
            if found is not None and found.conn is conn:
                del self._pairings[name]
        log.info("linking %s: linked", name)
        started = await self._restart(name)
        emit("linked", text=line, started=started,
             note=f"{name} is starting" if started else "restart the daemon to start it")

    async def _restart(self, name: str) -> bool:
        """Start the account's channel again now that it is linked (it failed for want of a session)."""
        runner = self.runners.get(name)
        if runner is None:  # not enabled, or not built at start: only a restart builds it
            return False
        await runner.stop()
        await runner.start()
        return True


__all__ = ["DeviceLinks", "EVENT", "qr_image"]
