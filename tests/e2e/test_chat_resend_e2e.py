"""A message the terminal chat sent just before its connection dropped runs once: the chat sends it
again with the same idempotency key once the connection is back, and the gateway takes the second
copy as the same run (gateway/live_client.py `send_chat`).

The drop is made where it hurts: the daemon has the message (it is in the session's history) but its
answer to `chat.send` never reached the client. A loopback proxy between the chat and the daemon
swallows what the daemon sends, then cuts the connection."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from clawgate.gateway.client import GatewayClient
from clawgate.gateway.live_client import LiveClient
from tests.harness import DaemonProcess
from tests.waiting import wait_until_async


class CuttingProxy:
    """Forwards TCP between a client and the daemon; `swallow()` stops passing the daemon's bytes to the
    client, `cut()` closes every connection it carries (the client sees a dropped connection)."""

    def __init__(self, port: int) -> None:
        self.port, self.swallowing = port, False
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._carry, "127.0.0.1", 0)
        return f"ws://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _carry(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        daemon_r, daemon_w = await asyncio.open_connection("127.0.0.1", self.port)
        self.writers += [client_w, daemon_w]

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, from_daemon: bool) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await src.read(65536):
                    if from_daemon and self.swallowing:
                        continue
                    dst.write(data)
                    await dst.drain()
            dst.close()
        await asyncio.gather(pump(client_r, daemon_w, False), pump(daemon_r, client_w, True))

    def swallow(self) -> None:
        self.swallowing = True

    def cut(self) -> None:
        for writer in self.writers:
            writer.transport.abort()
        self.writers.clear()
        self.swallowing = False

    async def close(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()


async def test_a_message_sent_as_the_connection_drops_runs_once(daemon: DaemonProcess, fake_model) -> None:
    proxy = CuttingProxy(daemon.port)
    url = await proxy.start()
    answers: list[dict[str, Any]] = []

    def on_event(frame: dict[str, Any]) -> None:
        payload = frame.get("payload") or {}
        if frame.get("event") == "chat" and payload.get("state") == "final":
            answers.append(payload)
    try:
        first = GatewayClient(url, daemon.client_token, subscribe=["main"], open_timeout=60)
        await first.__aenter__()
        live = LiveClient(first, "main", on_event=on_event, on_link=lambda state: None, open_timeout=60)
        live.start()
        proxy.swallow()  # from here the daemon's answer to chat.send is lost on the way
        sending = asyncio.ensure_future(live.send_chat("please repeat resend-once"))

        async def taken() -> bool:
            async with daemon.client(subscribe=["main"]) as probe:
                history = (await probe.request("chat.history", {"session": "main"}))["messages"]
            return any("resend-once" in json.dumps(m) for m in history)
        await wait_until_async(taken, "the daemon to have the message", interval=0.2)
        assert not sending.done(), "the chat.send answer should have been swallowed"
        proxy.cut()

        ack = await asyncio.wait_for(sending, 90)  # sent again once reconnected, with the same key
        assert ack["status"] == "duplicate", ack  # the gateway already had it: the same run, not a new one
        await wait_until_async(lambda: any("resend-once" in a.get("text", "") for a in answers),
                               "the answer to reach the chat", interval=0.2)
        asked = [r for r in fake_model.requests if "resend-once" in json.dumps(r["messages"][-1])]
        assert len(asked) == 1, asked  # the model was asked once
        await live.close()
    finally:
        await proxy.close()
    async with daemon.client(subscribe=["main"]) as probe:
        history = (await probe.request("chat.history", {"session": "main"}))["messages"]
    sent = [m for m in history if m.get("role") == "user" and "resend-once" in json.dumps(m)]
    assert len(sent) == 1, history  # the message is in the conversation once
