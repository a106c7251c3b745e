"""Approval of risky tool calls: ask the user, wait, and treat silence as "no".

The broker only emits an `approval_request` event and waits on a future; whichever channel
shows the request (Telegram buttons, a gateway event) resolves it by id. The loop never
learns which channel answered.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from .bus import new_id
from .core.events import EventHub
from .core.redact import redact
from .core.visible import visible

log = logging.getLogger(__name__)


@dataclass
class ApprovalRequest:
    session_key: str
    channel: str
    chat_id: str
    tool: str
    summary: str
    reason: str
    sender_id: str = ""
    owner: bool = False  # asked by the owner's run (guests' requests are shown to the owner, not to them)
    tainted: str = ""  # the untrusted content that entered the run before this call ("" when none did)
    id: str = field(default_factory=lambda: new_id("ap_"))

    def to_dict(self) -> dict[str, Any]:
        """The request's fields, and `shown_summary` / `shown_reason`: what a client shows the person who
        answers (every hidden character written <U+XXXX>, core/visible.py), so the web page and the terminal
        show the same as the chat channels do."""
        return {**self.__dict__, "shown_summary": visible(redact(self.summary)), "shown_reason": visible(self.reason)}


class ApprovalBroker:
    def __init__(self, events: EventHub, *, mode: Literal["ask", "deny", "allow"] = "ask", timeout: float = 300.0) -> None:
        self.events = events
        self.mode = mode
        # a session's own mode and the setting it comes from (its agent's approval_mode), or None: `mode`
        self.mode_of: Callable[[str], tuple[Literal["ask", "deny", "allow"], str] | None] | None = None
        self.timeout = timeout
        self._pending: dict[str, tuple[ApprovalRequest, asyncio.Future[bool]]] = {}

    async def ask(self, request: ApprovalRequest) -> tuple[bool, str]:
        """Return (approved, how) — how is "approved", "denied", "timeout" or the mode."""
        own = self.mode_of(request.session_key) if self.mode_of is not None else None
        mode, setting = own if own is not None else (self.mode, "tools.approval_mode")
        if mode == "allow":
            return True, f"allowed by {setting}"
        if mode == "deny":
            return False, f"denied by {setting}"
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending[request.id] = (request, future)
        self.events.emit("approval_request", session=request.session_key, request=request.to_dict())
        # The operator watching the daemon's log learns something waits, and how to answer it.
        log.warning("approval %s waiting (up to %g s) for %s in session %s: %s; answer with `clawgate approvals "
                    "approve %s` or `clawgate approvals deny %s`", request.id, self.timeout, request.tool,
                    request.session_key, request.summary, request.id, request.id)
        try:
            approved = await asyncio.wait_for(future, self.timeout)
            how = "approved" if approved else "denied"
        except asyncio.TimeoutError:
            approved, how = False, "timeout"
        except asyncio.CancelledError:  # the run stopped: nobody waits for this answer any more
            self.events.emit("approval_result", session=request.session_key, id=request.id, approved=False,
                             how="stopped")
            raise
        finally:
            self._pending.pop(request.id, None)
        log.info("approval %s: %s", request.id, how)
        self.events.emit("approval_result", session=request.session_key, id=request.id, approved=approved, how=how)
        return approved, how

    def resolve(self, approval_id: str, approved: bool) -> bool:
        entry = self._pending.get(approval_id)
        if entry is None or entry[1].done():
            return False
        entry[1].set_result(approved)
        return True

    def pending(self) -> list[dict[str, Any]]:
        return [req.to_dict() for req, _ in self._pending.values()]
