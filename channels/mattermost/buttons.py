"""Interactive message buttons: the aiohttp listener the Mattermost server posts a press to.

Mattermost keeps a button's `integration.context` on the server (clients only send the post and action
ids), and posts `{user_id, channel_id, post_id, context}` to `integration.url` when someone presses it.
Anyone who can reach the listener could post the same shape with any user_id, so each prompt carries
a random secret in its context, kept in the kit's store: a press counts only with the prompt's own
secret, and then as the Mattermost user id the server names (the kit admits only owners' answers).
"""

from __future__ import annotations

import hmac
import secrets
from typing import Any, Awaitable, Callable

from aiohttp import web

from clawgate.channels.listener import HttpListener

Answer = Callable[[str, str, bool, str], Awaitable[str]]  # (approval id, user id, approved, channel) -> line
MAX_BODY = 64 * 1024


def new_secret() -> str:
    return secrets.token_urlsafe(24)


def parse_listen(listen: str) -> tuple[str, int]:
    """"127.0.0.1:8071" -> (host, port); a clear error otherwise."""
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"channels.mattermost.actions_listen {listen!r} is not host:port (like 127.0.0.1:8071)")
    return host.strip("[]"), int(port)


class ActionListener:
    """Takes presses at POST /mattermost/actions; `secret_of(approval id)` says the prompt's secret."""

    path = "/mattermost/actions"

    def __init__(self, listen: str, secret_of: Callable[[str], str | None], answer: Answer) -> None:
        self.host, self.port = parse_listen(listen)
        self._secret_of = secret_of
        self._answer = answer
        self._listener: HttpListener | None = None

    async def start(self) -> None:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post(self.path, self._press)
        listener = HttpListener(app, host=self.host, port=self.port)
        self.port = await listener.start()
        self._listener = listener

    async def stop(self) -> None:
        if self._listener is not None:
            await self._listener.close()
            self._listener = None

    async def _press(self, request: web.Request) -> web.Response:
        try:
            body: Any = await request.json()
        except ValueError:
            return web.json_response({"error": {"message": "not JSON"}}, status=400)
        context = body.get("context") if isinstance(body, dict) else None
        if not isinstance(context, dict):
            return web.json_response({"error": {"message": "no context"}}, status=400)
        approval_id, given = str(context.get("approval_id") or ""), str(context.get("secret") or "")
        expected = self._secret_of(approval_id) if approval_id else None
        if not expected or not hmac.compare_digest(expected.encode(), given.encode()):
            return web.json_response({"error": {"message": "unknown prompt"}}, status=403)
        user_id = str(body.get("user_id") or "")
        if not user_id:
            return web.json_response({"error": {"message": "no user"}}, status=400)
        line = await self._answer(approval_id, user_id, bool(context.get("approve")), str(body.get("channel_id") or ""))
        return web.json_response({"ephemeral_text": line} if line else {})
