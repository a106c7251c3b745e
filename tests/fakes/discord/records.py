"""What the fake saw: every REST request and every Gateway frame, and waits on them.

Why separate: this is the test-facing side of the fake; it touches no protocol details. All
state is guarded by one ``threading.Condition`` (the server runs on its own thread and loop),
and every record notifies it, so waits are condition waits, not sleep-and-poll loops.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

JSONDict = dict[str, Any]


@dataclass
class UploadedFile:
    field: str  # the multipart field name, e.g. "files[0]"
    filename: str
    content_type: str | None
    data: bytes


@dataclass
class RestCall:
    method: str
    path: str  # without the /api/v10 prefix, e.g. "/channels/1/messages"
    query: dict[str, str]
    headers: dict[str, str]
    json: Any = None  # the JSON body, or a multipart request's payload_json
    files: list[UploadedFile] = field(default_factory=list)
    status: int | None = None  # the status the fake answered with (None while it is being handled)
    response: Any = None
    at: float = field(default_factory=time.monotonic)


@dataclass
class GatewayFrame:
    """A frame the client sent to the Gateway (``direction == "in"``) or the fake sent it ("out")."""

    direction: str
    connection: int  # connection number, 1 for the first WebSocket
    payload: JSONDict
    at: float = field(default_factory=time.monotonic)

    @property
    def op(self) -> int:
        return self.payload.get("op")  # type: ignore[return-value]


class Recorder:
    """``FakeDiscord`` part: records and the helpers tests read them with."""

    _cond: threading.Condition
    calls: list[RestCall]
    frames: list[GatewayFrame]
    messages: dict[str, list[JSONDict]]  # channel id -> messages, in order (deleted ones removed)

    def _record(self, item: RestCall | GatewayFrame) -> None:
        with self._cond:
            (self.calls if isinstance(item, RestCall) else self.frames).append(item)
            self._cond.notify_all()

    def _changed(self) -> None:
        with self._cond:
            self._cond.notify_all()

    # --- reading -------------------------------------------------------------------------

    def requests(self, method: str | None = None, path_prefix: str = "") -> list[RestCall]:
        with self._cond:
            return [c for c in self.calls if (method is None or c.method == method) and c.path.startswith(path_prefix)]

    def sent_messages(self, channel_id: str | int) -> list[JSONDict]:
        """Messages the bot created in ``channel_id`` (REST, interaction answers and follow-ups,
        ephemeral ones included: ``flags & 64``), edits applied, deleted ones gone."""
        with self._cond:
            return [m for m in self.messages.get(str(channel_id), []) if m["author"]["id"] == self.bot_user["id"]]

    def sent_texts(self, channel_id: str | int) -> list[str]:
        return [m["content"] for m in self.sent_messages(channel_id)]

    def received_frames(self, op: int | None = None) -> list[JSONDict]:
        """Payloads the client sent over the Gateway, optionally only one opcode."""
        with self._cond:
            return [f.payload for f in self.frames if f.direction == "in" and (op is None or f.op == op)]

    def dispatched(self, event: str | None = None) -> list[JSONDict]:
        """DISPATCH frames (op 0) the fake sent, optionally only one event name, in send order."""
        with self._cond:
            return [
                f.payload
                for f in self.frames
                if f.direction == "out" and f.op == 0 and (event is None or f.payload.get("t") == event)
            ]

    # --- waiting -------------------------------------------------------------------------

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Block until ``predicate()`` is truthy (re-checked on every record); returns its value.

        AssertionError on timeout, with the last requests and frames. Do not call from the
        event loop that runs the client under test: use ``wait_for_async`` there.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = predicate()
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(self._timeout_message(predicate, timeout))
                self._cond.wait(remaining)

    async def wait_for_async(self, predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
        """``wait_for`` on a worker thread, so the calling event loop keeps running."""
        return await asyncio.to_thread(self.wait_for, predicate, timeout)

    def _timeout_message(self, predicate: Callable[[], Any], timeout: float) -> str:
        name = getattr(predicate, "__qualname__", repr(predicate))
        calls = [f"  {c.method} {c.path} -> {c.status} {json.dumps(c.json, default=str)[:200]}"
                 for c in self.calls[-10:]]
        frames = [f"  {f.direction} #{f.connection} {json.dumps(f.payload, default=str)[:200]}"
                  for f in self.frames[-10:]]
        return (
            f"condition {name} not met within {timeout:.1f}s\nlast REST calls:\n"
            + ("\n".join(calls) or "  (none)")
            + "\nlast Gateway frames:\n"
            + ("\n".join(frames) or "  (none)")
        )
