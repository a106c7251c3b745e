"""Platform calls from a process that does not hold the channel's connection, in a fleet.

A connection that exists once per bot (a Discord Gateway session, a Slack Socket Mode socket, a
Matrix device with its encryption keys, an IMAP login) runs in one process of a fleet. The others
still run turns for this channel's chats and must send their replies, files, typing, status
edits and approval prompts: the kit's calls on the adapter go through `RoutedAdapter`, which runs
them on the local adapter when this process holds the connection (or runs alone) and otherwise
hands them to the `Forwarder` the daemon lends in a fleet (agent/fleet/calls.py). The holder runs
each one with `execute` on its connected adapter and answers with an envelope:

    {"ok": <result>}                                     the call's return value (a message id or None)
    {"error": "delivery", "message", "permanent", "retry_after"}   DeliveryError, as the adapter raised it
    {"error": "unconfirmed", "message"}                  it may have reached the platform: counted as sent
    {"error": "unsupported", "message"}                  NotImplementedError
    {"error": "failed", "message"}                       anything else: a temporary DeliveryError here

Only the calls in OPS cross over, by name, with arguments checked here before the adapter sees
them; rendering stays local (it needs no connection). Channels never import redis or the fleet:
the Forwarder is a protocol the daemon fills.
"""

from __future__ import annotations

import base64
import logging
from typing import Any, Awaitable, Callable, Protocol

from clawgate.channels.base import DeliveryError

from .adapter import Capabilities, PlatformAdapter, Target, Unconfirmed

Envelope = dict[str, Any]
TARGET_KEYS = ("chat_id", "thread_id", "reply_to", "send_key")  # send_key: the holder passes the part's key on
# op -> its argument names besides the target (each a string; `data` is base64)
OPS: dict[str, tuple[str, ...]] = {
    "send_text": ("text",),
    "send_file": ("name", "data", "caption"),
    "typing": (),
    "edit_text": ("message_id", "text"),
    "delete": ("message_id",),
    "send_approval": ("approval_id", "text"),
}


class Forwarder(Protocol):
    """What the daemon lends a kit in a fleet (agent/fleet/calls.py implements it)."""

    async def call(self, name: str, op: str, args: dict[str, Any]) -> Envelope:
        """Run `op` on the process holding singleton `name`; its envelope (or one saying why not)."""
        ...

    async def serve(self, name: str, execute: Callable[[str, dict[str, Any]], Awaitable[Envelope]]) -> None:
        """While this process holds `name` and is connected: run the calls others forward, until cancelled."""
        ...

    async def holder(self, name: str) -> str | None:
        """The node holding singleton `name` now, or None between holders."""
        ...


class BadCall(ValueError):
    """A forwarded call that is not one of OPS or whose arguments are not what it takes."""


def encode(op: str, target: Target, **args: Any) -> dict[str, Any]:
    # a target without a send_key is sent as before it existed, so such calls still reach an older holder
    where = {k: getattr(target, k) for k in TARGET_KEYS if k != "send_key" or target.send_key is not None}
    out: dict[str, Any] = {"target": where}
    for key, value in args.items():
        out[key] = base64.b64encode(value).decode() if key == "data" else value
    return out


def decode(op: str, args: Any, caps: Capabilities) -> tuple[Target, dict[str, Any]]:
    """The call's target and arguments, checked: only known ops, only their arguments, only strings."""
    if op not in OPS:
        raise BadCall(f"unknown platform call {op!r}")
    if not isinstance(args, dict) or set(args) != {"target", *OPS[op]}:
        raise BadCall(f"{op}: wrong arguments {sorted(args) if isinstance(args, dict) else type(args).__name__}")
    where = args["target"]
    if not isinstance(where, dict) or not set(TARGET_KEYS[:3]) <= set(where) <= set(TARGET_KEYS) \
            or not isinstance(where["chat_id"], str) \
            or not all(where.get(k) is None or isinstance(where[k], str) for k in TARGET_KEYS[1:]):
        raise BadCall(f"{op}: a target is chat_id, thread_id, reply_to and send_key (strings)")
    values: dict[str, Any] = {}
    for key in OPS[op]:
        if not isinstance(args[key], str):
            raise BadCall(f"{op}: {key} must be a string")
        values[key] = args[key]
    if op == "send_file":
        limit = caps.max_file_bytes
        if not caps.files or (limit and len(values["data"]) > (limit + 2) // 3 * 4):
            raise BadCall(f"send_file: over this channel's limit of {limit} bytes")
        values["data"] = base64.b64decode(values["data"], validate=True)
    return Target(where["chat_id"], where["thread_id"], where["reply_to"], where.get("send_key")), values


async def execute(adapter: PlatformAdapter, op: str, args: Any, log: logging.Logger) -> Envelope:
    """On the holder: one forwarded call on the connected adapter, answered as an envelope (never raises)."""
    try:
        target, values = decode(op, args, adapter.capabilities)
        return {"ok": await getattr(adapter, op)(target, *values.values())}
    except BadCall as exc:
        log.warning("refused a forwarded call: %s", exc)
        return {"error": "delivery", "message": str(exc), "permanent": True, "retry_after": None}
    except DeliveryError as exc:
        return {"error": "delivery", "message": str(exc), "permanent": exc.permanent, "retry_after": exc.retry_after,
                "too_large": exc.too_large, "channel_down": exc.channel_down}
    except Unconfirmed as exc:
        return {"error": "unconfirmed", "message": str(exc)}
    except NotImplementedError as exc:
        return {"error": "unsupported", "message": str(exc) or f"{adapter.name} has no {op}"}
    except Exception as exc:  # a bug in the adapter: the caller retries, as the dispatcher would here
        log.exception("forwarded %s failed", op)
        return {"error": "failed", "message": f"{type(exc).__name__}: {exc}"}


def unwrap(envelope: Envelope, name: str) -> Any:
    """The caller's side: the result, or the holder's error raised as the adapter would have raised it."""
    if "ok" in envelope:
        return envelope["ok"]
    message = f"{envelope.get('message') or 'no detail'} (sent through the process holding {name})"
    kind = envelope.get("error")
    if kind == "unconfirmed":
        raise Unconfirmed(message)
    if kind == "unsupported":
        raise NotImplementedError(message)
    retry_after = envelope.get("retry_after")
    raise DeliveryError(message, permanent=kind == "delivery" and bool(envelope.get("permanent")),
                        retry_after=float(retry_after) if isinstance(retry_after, (int, float)) else None,
                        too_large=bool(envelope.get("too_large")), channel_down=bool(envelope.get("channel_down")))


# Where a platform call goes now: None to the local adapter, else the Forwarder and the singleton name
# of the connection held elsewhere (the kit answers from its fleet state at each call).
Route = Callable[[], tuple[Forwarder, str] | None]


class RoutedAdapter:
    """What the kit's delivery, progress and prompts call: the adapter itself, or its holder through
    the fleet. Names, capabilities and render are the local adapter's."""

    def __init__(self, adapter: PlatformAdapter, route: Route) -> None:
        self.adapter, self.route = adapter, route
        self.name = adapter.name
        self.capabilities = adapter.capabilities

    def render(self, markdown: str) -> list[str]:
        return self.adapter.render(markdown)

    async def _run(self, op: str, target: Target, **args: Any) -> Any:
        remote = self.route()
        if remote is None:
            return await getattr(self.adapter, op)(target, *args.values())
        forward, singleton = remote
        return unwrap(await forward.call(singleton, op, encode(op, target, **args)), singleton)

    async def send_text(self, target: Target, text: str) -> str:
        return str(await self._run("send_text", target, text=text))

    async def send_file(self, target: Target, name: str, data: bytes, caption: str) -> str:
        return str(await self._run("send_file", target, name=name, data=data, caption=caption))

    async def typing(self, target: Target) -> None:
        await self._run("typing", target)

    async def edit_text(self, target: Target, message_id: str, text: str) -> None:
        await self._run("edit_text", target, message_id=message_id, text=text)

    async def delete(self, target: Target, message_id: str) -> None:
        await self._run("delete", target, message_id=message_id)

    async def send_approval(self, target: Target, approval_id: str, text: str) -> str | None:
        result = await self._run("send_approval", target, approval_id=approval_id, text=text)
        return None if result is None else str(result)


__all__ = ["Envelope", "Forwarder", "OPS", "Route", "RoutedAdapter", "decode", "encode", "execute", "unwrap"]
