"""Runs tool calls: validate, ask approval when needed, execute, audit, emit events.

The registry turns every failure into a ToolOutcome the model can read, so a bad call
never breaks a run, and lists definitions in a stable order so the prompt cache holds.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

from pydantic import ValidationError

from ..approvals import ApprovalBroker, ApprovalRequest
from ..core.audit import AuditLog
from ..core.errors import WriteRefused
from ..core.events import EventHub
from .base import Recovery, Tool, ToolContext, ToolError

log = logging.getLogger(__name__)


@dataclass
class ToolOutcome:
    content: str
    is_error: bool = False
    status: str = "ok"  # ok | failed (ran, did not succeed) | error | denied | unknown_tool | invalid_args


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool], *, events: EventHub, audit: AuditLog | None = None,
                 approvals: ApprovalBroker | None = None, result_cap: int = 64_000) -> None:
        self._tools: dict[str, Tool] = {}
        self._definitions: list[dict[str, Any]] | None = None
        for tool in tools:
            self.add(tool)
        self.events = events
        self.audit = audit
        self.approvals = approvals
        self.result_cap = result_cap
        # Hooks that may annotate an outcome after a call (e.g. a reminder to update the plan).
        self.result_hooks: list[Callable[[dict[str, Any], ToolOutcome, ToolContext], None]] = []
        # Interceptors may answer a call without running it (a replayed branch reuses recorded results).
        self.interceptors: list[Callable[[dict[str, Any], ToolContext], ToolOutcome | None]] = []
        # Whether a session's agent may use a tool, by session key and tool name (config/agents.py; None: all).
        self.allowed: Callable[[str, str], bool] | None = None

    def add(self, tool: Tool) -> None:
        self._tools[tool.name] = tool
        self._definitions = None

    def remove(self, name: str) -> None:
        """Tools can go away (an MCP server that no longer offers one after a restart)."""
        if self._tools.pop(name, None) is not None:
            self._definitions = None

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        return sorted(self._tools)

    def definitions(self) -> list[dict[str, Any]]:
        """Built once: schemas are static, and the same bytes every time keep the prompt cache."""
        if self._definitions is None:
            self._definitions = [self._tools[name].definition() for name in self.names]
        return self._definitions

    def has_side_effects(self, name: str) -> bool:
        tool = self._tools.get(name)
        return True if tool is None else tool.side_effects

    def recovery(self, name: str) -> Recovery:
        """How a call of this tool cut by a crash is resolved (an unknown tool: never repeated)."""
        tool = self._tools.get(name)
        if tool is None:
            return "unknown"
        return tool.recovery or ("unknown" if tool.side_effects else "rerun")

    def concurrent(self, calls: list[dict[str, Any]]) -> bool:
        """Whether these calls of one turn may run at the same time (each tool says so)."""
        return len(calls) > 1 and all((tool := self._tools.get(c["name"])) is not None and tool.concurrent for c in calls)

    async def execute(self, call: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        name, raw_args, call_id = call["name"], call.get("input") or {}, call["id"]
        ctx = replace(ctx, call_id=call_id)
        started = time.perf_counter()
        self.events.emit("tool_start", session=ctx.session_key, run_id=ctx.run_id, tool=name, id=call_id,
                         summary=_short(raw_args))
        outcome = next((o for hook in self.interceptors if (o := hook(call, ctx)) is not None), None) \
            or await self._execute(name, raw_args, ctx)
        ctx.taint.take_in(outcome.content, name)  # untrusted data in the result taints the rest of the run
        duration = (time.perf_counter() - started) * 1000
        if len(outcome.content) > self.result_cap:
            cut = len(outcome.content) - self.result_cap
            outcome.content = outcome.content[: self.result_cap] + f"\n[… truncated {cut} characters]"
        for hook in self.result_hooks:
            hook(call, outcome, ctx)
        if self.audit:
            self.audit.record(user=ctx.sender_id, session=ctx.session_key, tool=name, args=raw_args,
                              status=outcome.status, duration_ms=duration)
        self.events.emit("tool_end", session=ctx.session_key, run_id=ctx.run_id, tool=name, id=call_id,
                         status=outcome.status, duration_ms=round(duration, 1))
        return outcome

    async def _execute(self, name: str, raw_args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        allowed = self.allowed
        if allowed is not None and not allowed(ctx.session_key, name):  # never offered; a call anyway is refused
            return ToolOutcome(f"error: {name} is not one of this agent's tools\nfix: use one of: "
                               f"{', '.join(n for n in self.names if allowed(ctx.session_key, n))}", True, "denied")
        tool = self._tools.get(name)
        if tool is None:
            return ToolOutcome(f"error: there is no tool named {name!r}\nfix: use one of: {', '.join(self.names)}",
                               True, "unknown_tool")
        try:
            args = tool.Arguments.model_validate(raw_args)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
            return ToolOutcome(f"error: invalid arguments for {name}: {problems}\nfix: call {name} again with arguments "
                               "matching its input schema", True, "invalid_args")
        reason = tool.needs_approval(args, ctx)
        if inspect.isawaitable(reason):  # a check that has to wait (web_fetch resolves its host)
            reason = await reason
        if ctx.taint.tainted and (effect := tool.lasting_effect(args, ctx)) and effect not in (reason or ""):
            reason = f"{reason}; {effect}" if reason else effect
        if reason:
            approved, how = await self._approve(tool, args, ctx, ctx.taint.note(reason))
            if not approved:
                return ToolOutcome(f"not run: the user did not approve this call ({how}). Reason it needed approval: "
                                   f"{ctx.taint.note(reason)}. Do not retry it unchanged; ask the user or choose "
                                   "another way.", True, "denied")
            ctx = replace(ctx, approved=True)
        try:
            result = await tool.run(args, ctx)
            return ToolOutcome(result, False, tool.result_status(result))
        except ToolError as exc:
            return ToolOutcome(exc.render(), True, "error")
        except (asyncio.CancelledError, WriteRefused):  # a fleet worker that lost the session stops the run
            raise
        except Exception as exc:  # a tool bug must not end the run
            log.exception("tool %s failed", name)
            return ToolOutcome(f"error: {name} failed unexpectedly: {type(exc).__name__}: {exc}", True, "error")

    async def _approve(self, tool: Tool, args: Any, ctx: ToolContext, reason: str) -> tuple[bool, str]:
        if self.approvals is None:
            return False, "no approval channel"
        request = ApprovalRequest(session_key=ctx.session_key, channel=ctx.channel, chat_id=ctx.chat_id,
                                  tool=tool.name, summary=tool.summarize(args), reason=reason,
                                  sender_id=ctx.sender_id, owner=ctx.owner,
                                  tainted="; ".join(ctx.taint.sources))
        return await self.approvals.ask(request)


SUMMARY_CAP = 200  # characters of a step summary in events
VALUE_CAP = 60     # characters kept of one string value


def _clip(value: Any, depth: int = 0) -> Any:
    """A JSON-safe copy of an argument value with long strings and lists cut (a summary, not the data)."""
    if isinstance(value, str):
        return value if len(value) <= VALUE_CAP else value[:VALUE_CAP] + "…"
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if depth >= 2:
        return _clip(json.dumps(value, ensure_ascii=False, default=str))
    if isinstance(value, dict):
        return {str(k): _clip(v, depth + 1) for k, v in list(value.items())[:8]}
    if isinstance(value, (list, tuple)):
        return [_clip(v, depth + 1) for v in list(value)[:8]]
    return _clip(str(value))


def _short(args: Any) -> str:
    """The call's arguments as a JSON object text (clients parse it), cut to SUMMARY_CAP characters.

    Arguments that do not fit are left out whole and counted under "…", so the text always parses."""
    if not isinstance(args, dict):
        args = {"input": args}
    shown: dict[str, Any] = {}
    items = list(args.items())
    for i, (key, value) in enumerate(items):
        candidate = {**shown, str(key): _clip(value)}
        left = len(items) - i - 1
        if len(json.dumps({**candidate, "…": left} if left else candidate, ensure_ascii=False)) > SUMMARY_CAP:
            shown["…"] = len(items) - i
            break
        shown = candidate
    return json.dumps(shown, ensure_ascii=False)
