"""The long connection (Feishu's event stream without a public URL) run beside the daemon's event loop.

lark-oapi's `ws.Client.start()` runs the connection on a loop the SDK keeps in a module global (taken at
import) and never returns, so it cannot run on the daemon's loop, nor once per account in threads of their
own (each would schedule its tasks on the one global loop). Every account's connection therefore runs on
one loop in one thread of its own (`LarkLoop`, set as the SDK's loop once), doing what `start()` does —
`_connect()` then `_ping_loop()` — and nothing else of the SDK is touched. The SDK calls the event
handler synchronously on that loop and sends Feishu the handler's outcome in the response frame; the
handler hands the event to the daemon's loop (`run_coroutine_threadsafe`) and returns only once the kit
has it durably, so a crash before that leaves the event unanswered and Feishu delivers it again. A lost
connection ends `run()` with ChannelUnavailable: the kit's runner reconnects with its backoff and shows
the channel as retrying (the SDK's own reconnect is off).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import Future
from typing import Any

LOST_POLL_SECONDS = 0.5  # how often the connection is checked for having gone away


class ConnectionRefused(Exception):
    """Feishu refused the app's credentials on the long connection's endpoint."""


class ConnectionLost(Exception):
    """The long connection could not be made, or went away."""


class LarkLoop:
    """The one event loop every account's long connection runs on (see the module's docstring)."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def get(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None or cls._loop.is_closed():
                import lark_oapi.ws.client as ws_client

                loop = asyncio.new_event_loop()
                loop.set_exception_handler(_quiet)
                ws_client.loop = loop  # the SDK schedules its receive and handler tasks on this module global
                threading.Thread(target=loop.run_forever, name="feishu-long-connection", daemon=True).start()
                cls._loop = loop
            return cls._loop


def _quiet(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The SDK's receive task ends with the connection's error, which `run()` reports itself."""
    logging.getLogger("clawgate.channels.feishu").debug("long connection: %s", context.get("message"))


class LongConnection:
    """One account's event stream. `handler` is the SDK's EventDispatcherHandler."""

    def __init__(self, app_id: str, app_secret: str, domain: str, handler: Any) -> None:
        self._settings = (app_id, app_secret, domain)
        self._handler = handler
        self._future: Future[None] | None = None

    def _client(self) -> Any:
        """The SDK's client, made on the long connection's loop: it starts a cache-clearing task on the loop
        it is made on, and its lock belongs there too."""
        import lark_oapi as lark

        app_id, app_secret, domain = self._settings
        return lark.ws.Client(app_id, app_secret, event_handler=self._handler, domain=domain,
                              log_level=lark.LogLevel.WARNING, auto_reconnect=False)

    async def run(self) -> None:
        """Until cancelled or the connection is lost (ConnectionLost) or refused (ConnectionRefused)."""
        self._future = asyncio.run_coroutine_threadsafe(self._hold(), LarkLoop.get())
        try:
            await asyncio.wrap_future(self._future)
        finally:
            self._future.cancel()

    async def _hold(self) -> None:
        from lark_oapi.ws.exception import ClientException

        client = self._client()
        try:
            await client._connect()
        except ClientException as e:
            raise ConnectionRefused(str(e) or type(e).__name__) from None
        except Exception as e:  # the endpoint or the WebSocket unreachable: the runner retries
            await client._disconnect()
            raise ConnectionLost(str(e) or type(e).__name__) from None
        ping = asyncio.get_running_loop().create_task(client._ping_loop())
        try:
            while client._conn is not None:
                await asyncio.sleep(LOST_POLL_SECONDS)
            raise ConnectionLost("the long connection closed")
        finally:
            ping.cancel()
            await client._disconnect()

