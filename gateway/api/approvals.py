"""approvals.list, approvals.resolve: risky tool calls waiting for a yes or no."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from clawgate.agent.core.errors import NotFound
from clawgate.agent.services import Services

from ..connection import Connection
from ..methods import Params, method
from .sessions import NoParams


class ApprovalResolve(Params):
    id: str = Field(min_length=1, max_length=64)
    approve: bool


@method("approvals.list", NoParams, "tool calls waiting for the user's approval")
async def approvals_list(services: Services, conn: Connection, p: NoParams) -> dict[str, Any]:
    return {"pending": services.approvals.pending()}


@method("approvals.resolve", ApprovalResolve, "approve or deny a pending tool call")
async def approvals_resolve(services: Services, conn: Connection, p: ApprovalResolve) -> dict[str, Any]:
    if not services.approvals.resolve(p.id, p.approve):
        raise NotFound(f"no pending approval {p.id!r}; it may have timed out")
    return {"id": p.id, "approved": p.approve}
