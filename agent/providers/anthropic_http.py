"""A streamed message request sent with the SDK's own aiohttp session, one layer down.

The SDK sends through httpx2 and an httpx-to-aiohttp adapter: per call an httpx Request with its
headers normalised again, the auth and redirect wrappers, an httpx Response around aiohttp's, and
every chunk of the stream passed up through three iterators. That was a third of the provider's
CPU per call (0.9 -> 0.65 ms against a zero-latency server) and a sixth of a message's with 100
sessions at once. Here the request the SDK built once (URL, headers, timeout) goes straight to the
session the SDK's transport pools its connections in, with the arguments that transport passes
(proxy included); the stream is read with the SDK's SSE decoder; and every failure is raised as
the exception the SDK's own path raises (status errors with their response and body, timeouts,
connection and read errors), so the provider's retry policy cannot tell the two paths apart.

Only for a client whose transport for the URL is the SDK's aiohttp one; any other client (a
test's mock transport, plain httpx) keeps the SDK's whole path.

A JSON body where the event stream was asked for is read whole (stream.json_events): a complete
message is the answer, an error envelope that error, anything else retryable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .stream import json_events

if TYPE_CHECKING:
    import anthropic
    import httpx2
    from aiohttp import ClientResponse


class DirectStream:
    """Sends one request body and feeds each decoded event (a dict) to `feed`."""

    def __init__(self, client: "anthropic.AsyncAnthropic", transport: Any, url: "httpx2.URL",
                 headers: list[tuple[str, str]], extensions: dict[str, Any]) -> None:
        from aiohttp import BasicAuth, ClientTimeout

        self.client = client
        self.transport = transport
        self.url = url
        self._url = str(url)
        self.headers = headers
        self._headers = dict(headers)
        timeout = extensions.get("timeout") or {}
        self._timeout = ClientTimeout(sock_connect=timeout.get("connect"), sock_read=timeout.get("read"),
                                      connect=timeout.get("pool"))
        proxy = transport.proxy
        self._proxy: dict[str, Any] = {} if proxy is None else {
            "proxy": str(proxy.url),
            "proxy_auth": BasicAuth(proxy.auth[0], proxy.auth[1]) if proxy.auth else None,
            "proxy_headers": proxy.headers,
        }

    @classmethod
    def for_client(cls, client: "anthropic.AsyncAnthropic", url: "httpx2.URL", headers: list[tuple[str, str]],
                   extensions: dict[str, Any]) -> "DirectStream | None":
        """None when the client would not send this URL through the SDK's aiohttp transport."""
        from anthropic._vendor.httpx_aiohttp.transport import AiohttpTransport

        transport = client._client._transport_for_url(url)
        if type(transport) is not AiohttpTransport:
            return None
        return cls(client, transport, url, headers, extensions)

    async def send(self, body: bytes, feed: Callable[[dict[str, Any]], None]) -> None:
        import httpx2
        from anthropic import _exceptions as anthropic
        from aiohttp import ClientSession
        from anthropic._streaming import SSEDecoder
        from anthropic._vendor.httpx_aiohttp.transport import map_aiohttp_exceptions

        transport = self.transport
        if not isinstance(transport.client, ClientSession):  # created at first use, as the transport does
            transport.client = transport.get_client()
        try:
            with map_aiohttp_exceptions():
                response = await transport.client.request(
                    "POST", self._url, headers=self._headers, data=body, compress=False, timeout=self._timeout,
                    **self._proxy).__aenter__()
        except httpx2.TimeoutException as exc:
            raise anthropic.APITimeoutError(request=self._request()) from exc
        except Exception as exc:
            raise anthropic.APIConnectionError(request=self._request()) from exc
        try:
            if not 200 <= response.status < 300:
                raise self.client._make_status_error_from_response(self._response(response, await response.read()))
            if response.content_type == "application/json":  # no event stream: one whole body (stream.py)
                with map_aiohttp_exceptions():
                    raw = await response.read()
                for event in json_events(raw):
                    if event["type"] == "error":
                        message = str(event["error"].get("message") or event)
                        raise self.client._make_status_error(message, body=event,
                                                             response=self._response(response, raw))
                    feed(event)
                return
            # The SDK's decoder reads each line, but the lines are cut from what the socket delivered
            # here, in one pass per read: its own reader passes every event up through three async
            # generators, a third of the stream's cost (what a stream is made of stays the decoder's).
            decoder, pending = SSEDecoder(), b""
            with map_aiohttp_exceptions():  # a read that fails midway is the SDK's read error, as there
                async for chunk in response.content.iter_any():
                    pending += chunk
                    end = pending.rfind(b"\n")  # a line ends at \n (also the \n of \r\n, never cut from its \r)
                    if end >= 0:
                        self._decode(decoder, pending[:end + 1], response, feed)
                        pending = pending[end + 1:]
            if pending:  # the last line, unterminated: decoded as the SDK's reader does
                self._decode(decoder, pending, response, feed)
        finally:
            response.release()

    def _decode(self, decoder: Any, lines: bytes, response: "ClientResponse",
                feed: Callable[[dict[str, Any]], None]) -> None:
        """Hand whole lines to the SDK's decoder; feed each data event, raise an error event."""
        for raw_line in lines.splitlines():
            sse = decoder.decode(raw_line.decode("utf-8"))
            if sse is None or sse.event is None or sse.event == "ping":
                continue
            if sse.event == "error":  # arrives inside a 200 stream (an overload midway)
                raise self._stream_error(sse, response)
            if sse.data:
                feed(sse.json())

    def _request(self) -> "httpx2.Request":
        import httpx2

        return httpx2.Request("POST", self.url, headers=self.headers)

    def _response(self, response: "ClientResponse", content: bytes = b"") -> "httpx2.Response":
        import httpx2

        return httpx2.Response(response.status, headers=response.raw_headers, content=content,
                               request=self._request())

    def _stream_error(self, sse: Any, response: "ClientResponse") -> "anthropic.APIStatusError":
        """What the SDK's stream raises for an error event: its message and parsed body."""
        body: Any = sse.data
        try:
            body = sse.json()
            message = f"{body}"
        except Exception:
            message = sse.data or f"Error code: {response.status}"
        return self.client._make_status_error(message, body=body, response=self._response(response))
