"""channels.link, channels.link.cancel: link a chat platform's device from a gateway client (the web page).

Every authenticated client holds the gateway token, so is the owner; the QR codes (or the phone-number
pairing code) go to the calling connection only, as `link` events (gateway/device_links.py)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from clawgate.agent.core.errors import Unavailable
from clawgate.agent.services import DeviceLinking, Services

from ..connection import Connection
from ..methods import Params, method

NAME = r"^[a-z][a-z0-9_-]{0,63}$"


class LinkParams(Params):
    channel: str = Field(pattern=NAME)
    account: str = Field("default", pattern=NAME)


class StartParams(LinkParams):
    # WhatsApp: a pairing code for this number (E.164, checked by the adapter) instead of QR codes
    phone: str | None = Field(None, min_length=1, max_length=40)


def _links(services: Services) -> DeviceLinking:
    if services.device_links is None:
        raise Unavailable("this daemon links no devices")
    return services.device_links


@method("channels.link", StartParams, "link a device of a chat platform account (WhatsApp linked mode): its QR "
                                      "codes (or, with `phone`, its pairing code), then the result, come as "
                                      "`link` events to this client only")
async def link(services: Services, conn: Connection, p: StartParams) -> dict[str, Any]:
    return await _links(services).start(conn, p.channel, p.account, p.phone)


@method("channels.link.cancel", LinkParams, "stop the pairing this client started (closing the connection does too)")
async def cancel(services: Services, conn: Connection, p: LinkParams) -> dict[str, Any]:
    return await _links(services).cancel(conn, p.channel, p.account)
