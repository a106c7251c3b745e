"""The Chat API as the app, through google-apps-chat's generated client (REST transport).

The client is synchronous (its REST transport is requests with google-auth's AuthorizedSession, which
fetches and refreshes the app's token itself), so each call runs on a worker thread. It is pointed at
`base_url` with the client's own `client_options.api_endpoint` (an `http://` endpoint is kept as it is:
a test's fake). The client's default retries are turned off: the kit retries, and says so.

Errors are google-api-core's exceptions (the HTTP status and Google's error status); a token the key
cannot get is google-auth's RefreshError; a request that went out and got no answer may have been
applied (`SentMaybe`).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass
from typing import Any

from clawgate.channels.googlechat.auth import credentials
from clawgate.channels.googlechat.settings import GoogleChatSettings
from clawgate.channels.kit.adapter import send_key_digest

REPLY_IN_THREAD = "REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD"
MESSAGE_ID_CHARS = 63  # a custom message id: `client-`, then lowercase letters, digits and hyphens, 63 at most


def request_id(send_key: str) -> str:
    """A reply part's send_key as the create's `requestId`: a UUID, as Google recommends."""
    return str(uuid.UUID(send_key_digest(send_key)[:32]))


def custom_message_id(send_key: str) -> str:
    """A reply part's send_key as the create's `messageId` (the message's custom id in its space)."""
    return ("client-" + send_key_digest(send_key))[:MESSAGE_ID_CHARS]


class SentMaybe(Exception):
    """The request went out and no answer came back: it may have been applied."""


@dataclass(frozen=True)
class ApiError(Exception):
    """A refusal: the HTTP status (0: no answer, the network), whether our credentials were refused, and
    the wait a 429 asked for."""

    status: int
    message: str
    auth: bool = False
    retry_after: float | None = None

    def __str__(self) -> str:
        return f"HTTP {self.status}: {self.message}" if self.status else self.message


def _translate(exc: BaseException) -> BaseException:
    """google-api-core / google-auth / requests errors as ApiError or SentMaybe."""
    import requests
    from google.api_core import exceptions as core
    from google.auth import exceptions as auth

    if isinstance(exc, auth.RefreshError):
        return ApiError(401, f"the token endpoint refused the service account key ({str(exc)[:160]})", auth=True)
    if isinstance(exc, auth.TransportError):
        return ApiError(0, f"the token endpoint is not reachable ({str(exc)[:160]})")
    if isinstance(exc, core.GoogleAPICallError):
        status = int(exc.code or 0)
        wait = None
        response = getattr(exc, "response", None)
        header = response.headers.get("Retry-After") if response is not None and hasattr(response, "headers") else None
        try:
            wait = float(header) if header is not None else None
        except ValueError:
            wait = None
        return ApiError(status, str(exc.message or exc)[:300], auth=status == 401,
                        retry_after=wait)
    if isinstance(exc, (requests.exceptions.ReadTimeout,)):
        return SentMaybe("no answer from the Chat API")
    if isinstance(exc, (requests.exceptions.RequestException, OSError)):
        return ApiError(0, f"the Chat API is not reachable ({type(exc).__name__})")
    return exc


class ChatApi:
    """One app's Chat client (one per account: nothing shared between accounts)."""

    def __init__(self, settings: GoogleChatSettings) -> None:
        self.settings = settings
        self.endpoint = settings.api_endpoint()
        self._client: Any = None
        self.app_email = ""

    def client(self) -> Any:
        if self._client is None:
            from google.api_core.client_options import ClientOptions
            from google.apps import chat_v1

            creds = credentials(self.settings)
            self.app_email = str(getattr(creds, "service_account_email", "") or "")
            self._client = chat_v1.ChatServiceClient(
                credentials=creds, transport="rest", client_options=ClientOptions(api_endpoint=self.endpoint))
        return self._client

    async def _call(self, method: str, **kwargs: Any) -> Any:
        def run() -> Any:
            try:
                return getattr(self.client(), method)(retry=None, timeout=self.settings.request_timeout_seconds,
                                                      **kwargs)
            except Exception as e:  # translated on this thread: the exception types are the libraries'
                raise _translate(e) from None

        return await asyncio.to_thread(run)

    async def check(self) -> str:
        """A token for the key and one page of the spaces the app is in: the key and the API both answer."""
        from google.apps import chat_v1

        pager = await self._call("list_spaces", request=chat_v1.ListSpacesRequest(page_size=1))
        return f"{len(list(pager.spaces))} space(s) on the first page"

    async def create(self, space: str, message: dict[str, Any], thread: str | None, *,
                     send_key: str | None = None) -> str:
        """The message's resource name. With a send_key the create is idempotent twice over: its `requestId`
        makes Chat return the message an earlier attempt made instead of a new one, and its `messageId` (a
        custom id, unique in the space) turns a create Chat no longer matches by request into ALREADY_EXISTS,
        which is the message sent: never a failure, never a second message."""
        from google.apps import chat_v1

        if thread:
            message = {**message, "thread": {"name": thread}}
        fields: dict[str, Any] = {"message_reply_option": REPLY_IN_THREAD} if thread else {}
        if send_key:
            fields.update(request_id=request_id(send_key), message_id=custom_message_id(send_key))
        request = chat_v1.CreateMessageRequest(parent=space, message=chat_v1.Message(message), **fields)
        try:
            sent = await self._call("create_message", request=request)
        except ApiError as e:
            if e.status == 409 and send_key:  # ALREADY_EXISTS: our custom id's message exists, made by an earlier attempt
                return f"{space}/messages/{custom_message_id(send_key)}"
            raise
        return str(sent.name)

    async def update(self, name: str, message: dict[str, Any], fields: list[str]) -> None:
        from google.apps import chat_v1
        from google.protobuf import field_mask_pb2

        request = chat_v1.UpdateMessageRequest(message=chat_v1.Message({**message, "name": name}),
                                               update_mask=field_mask_pb2.FieldMask(paths=fields))
        await self._call("update_message", request=request)

    async def delete(self, name: str) -> None:
        from google.apps import chat_v1

        await self._call("delete_message", request=chat_v1.DeleteMessageRequest(name=name))

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):  # closing a session that failed to open: nothing to release
                client.transport.close()
