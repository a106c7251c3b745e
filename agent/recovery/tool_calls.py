"""Resolving tool calls cut by a crash: the intent was journalled, the result never was.

Each tool declares how such a call is resolved (tools/base.py `Recovery`): a call that is safe
to repeat runs again; a call whose effect can be checked (write_file, edit_file) is compared
with the world and run again only when its effect is missing; any other call (exec, a message,
a web request) is never repeated: the model gets UNKNOWN_OUTCOME as its result, the run's
`tool_outcome_unknown` event names it, and the user sees it under the answer (`unknown_notice`).
The completeness check reads the same events, so "done" cannot go out without naming them.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

from pydantic import ValidationError

from ..core.events import EventHub
from ..session import Record, Session
from ..tools import ToolContext, ToolOutcome, ToolRegistry
from ..tools.base import Checked, ToolError

UNKNOWN_OUTCOME = (
    "The daemon restarted while this call was running, so its outcome is unknown. It was NOT "
    "re-run because its effect reaches outside the workspace or cannot be checked{why}. Check its effect "
    "(e.g. read the file, list the folder) before deciding whether to run it again, and tell the user "
    "its outcome is unknown."
)
# A crash test names the point where the daemon must die: CLAWGATE_CRASH_AT=after_intent:<tool>.
CRASH_ENV = "CLAWGATE_CRASH_AT"


def crash_point(name: str) -> None:
    """SIGKILL this process when a crash test asked to die exactly here (the window between two
    writes is too short to hit from outside). Nothing happens unless CLAWGATE_CRASH_AT names it."""
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


async def resolve(tools: ToolRegistry, events: EventHub, session: Session, call: dict[str, Any],
                  ctx: ToolContext) -> ToolOutcome | None:
    """The outcome of a call being recovered, or None when it must run (again) now."""
    intent, done = session.journal(call["id"])
    if done is not None:
        return ToolOutcome(done["content"], bool(done.get("is_error")), "replayed")
    if intent is None:  # the crash came before the call started
        return None
    name = call["name"]
    how = tools.recovery(name)
    if how == "rerun":
        session.append("event", name="tool_recovered", run_id=ctx.run_id, id=call["id"], tool=name, how="rerun")
        return None
    checked = await _check(tools, call, ctx) if how == "check" else None
    if checked is not None and checked.done is False:
        session.append("event", name="tool_recovered", run_id=ctx.run_id, id=call["id"], tool=name, how="finish",
                       note=checked.note)
        return None
    if checked is not None and checked.done:
        outcome = ToolOutcome(f"This call had completed before the daemon restarted (checked on restart: "
                              f"{checked.note}).", False, "recovered")
        session.append("event", name="tool_recovered", run_id=ctx.run_id, id=call["id"], tool=name, how="checked",
                       note=checked.note)
    else:
        why = f" ({checked.note})" if checked is not None else ""
        outcome = ToolOutcome(UNKNOWN_OUTCOME.format(why=why), True, "unknown")
        summary = describe(tools, call)
        session.append("event", name="tool_outcome_unknown", run_id=ctx.run_id, id=call["id"], tool=name,
                       summary=summary)
        events.emit("tool_outcome_unknown", session=session.key, run_id=ctx.run_id, tool=name, id=call["id"],
                    summary=summary)
    # Recorded like a finished call: a second crash replays this outcome instead of deciding again.
    session.append("tool_done", durable=True, id=call["id"], content=outcome.content, is_error=outcome.is_error,
                   status=outcome.status)
    await session.flush()
    return outcome


async def _check(tools: ToolRegistry, call: dict[str, Any], ctx: ToolContext) -> Checked:
    tool = tools.get(call["name"])
    if tool is None:
        return Checked(None, "the tool is no longer available")
    try:
        return await tool.check(tool.Arguments.model_validate(call.get("input") or {}), ctx)
    except ValidationError:
        return Checked(None, "its arguments are not valid")
    except ToolError as exc:
        return Checked(None, exc.problem)
    except OSError as exc:
        return Checked(None, f"the check failed: {exc.strerror or exc}")


def describe(tools: ToolRegistry, call: dict[str, Any], cap: int = 200) -> str:
    """One line naming the call for the user: the tool's own summary of its arguments."""
    tool = tools.get(call["name"])
    try:
        text = tool.summarize(tool.Arguments.model_validate(call.get("input") or {})) if tool else ""
    except ValidationError:
        text = ""
    text = " ".join((text or f"{call['name']} {json.dumps(call.get('input') or {}, ensure_ascii=False)}").split())
    return text if len(text) <= cap else text[: cap - 1] + "…"


def unknown_outcomes(session: Session, run_id: str) -> list[Record]:
    """The run's calls whose outcome stayed unknown after a restart, oldest first."""
    found: list[Record] = []
    for record in reversed(session.records):
        if record.get("kind") == "user" and record.get("inbound_id") == run_id:
            break
        if record.get("kind") == "event" and record.get("name") == "tool_outcome_unknown" \
                and record.get("run_id") == run_id:
            found.append(record)
    return found[::-1]


def unknown_notice(unknown: list[Record]) -> str:
    """What the user reads under the answer when calls of the run have an unknown outcome."""
    if not unknown:
        return ""
    calls = "\n".join(f"- {r.get('summary') or r.get('tool')}" for r in unknown)
    return ("\n\n---\nOutcome unknown: the daemon restarted while "
            + ("this call was" if len(unknown) == 1 else "these calls were")
            + " running, and it was not repeated (it may or may not have taken effect):\n" + calls
            + "\nCheck the effect before relying on it.")
