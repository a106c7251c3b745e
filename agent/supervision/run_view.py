"""What a task or run did, read back from the session log (the one source of truth).

Drift control and the completeness check both need "the calls made since X, with their
outcomes": this module projects them from the log's tool_intent / tool_done records, so
neither keeps counters of its own that a crash or a restart could lose.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .drift import Action, action_key
from ..context.shared_view import own_records
from ..tasks.store import ANYONE, Anyone
from ..providers.base import text_of
from ..session import Record, Session

PROGRESS_ACTIONS = {"plan", "start", "complete", "note"}


@dataclass
class Step:
    """One executed tool call with its outcome (for reports and prompts)."""

    turn: int
    key: str
    is_error: bool
    result: str  # first line of the result, capped
    seq: int


@dataclass
class Span:
    """The records of a task or run from `start_seq` on."""

    actions: list[Action] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    turns: int = 0
    texts: list[str] = field(default_factory=list)  # assistant text, newest last
    first_ts: float = 0.0
    errors: dict[str, str] = field(default_factory=dict)  # call key -> its latest error line


def start_index(session: Session, *, seq: int | None = None, ts: float | None = None) -> int:
    """Index in session.records of the first record at or after `seq` (or time `ts`)."""
    records = session.records
    i = len(records)
    while i > 0:
        r = records[i - 1]
        if (seq is not None and int(r.get("seq", 0)) < seq) or (ts is not None and float(r.get("ts", 0)) < ts):
            break
        i -= 1
    return i


def span(session: Session, start: int, *, turn_offset: int = 0, person: str | None | Anyone = ANYONE) -> Span:
    """Project records[start:] into actions (for drift.signals) and steps (for reports); with `person`, only
    that person's runs' records (a conversation several people share: context/shared_view.py)."""
    out = Span()
    records = session.records[start:] if person is ANYONE else own_records(session, start, person)
    if records:
        out.first_ts = float(records[0].get("ts", 0.0))
    intents: dict[str, Record] = {}
    turn = turn_offset
    for r in records:
        kind = r.get("kind")
        if kind == "assistant" and not r.get("drift_reset"):  # the reset's placeholder is not a model turn
            turn += 1
            out.turns += 1
            text = text_of(r.get("content") or []).strip()
            if text:
                out.texts.append(text)
        elif kind == "tool_intent":
            intents[str(r.get("id"))] = r
        elif kind == "tool_done" and (intent := intents.pop(str(r.get("id")), None)) is not None:
            name, args = str(intent.get("name")), intent.get("input") or {}
            key = action_key(name, args)
            is_error = bool(r.get("is_error"))
            first = _first_line(str(r.get("content") or ""))
            progress = name == "task" and not is_error and isinstance(args, dict) and args.get("action") in PROGRESS_ACTIONS
            out.actions.append(Action(turn=turn, name=name, key=key, is_error=is_error,
                                      text=f"{name} {_values(args)}", progress=progress))
            out.steps.append(Step(turn=turn, key=key, is_error=is_error, result=first, seq=int(r.get("seq", 0))))
            if is_error:
                out.errors[key] = first
    return out


def _first_line(text: str, cap: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= cap else line[:cap] + "…"


def _values(args: Any) -> str:
    if isinstance(args, dict):
        return " ".join(_values(v) for v in args.values())
    if isinstance(args, list):
        return " ".join(_values(v) for v in args)
    return str(args)[:400]


def render_steps(steps: list[Step], limit: int = 30) -> str:
    """Numbered lines `turn N: key -> ok|ERROR: first line` (the newest `limit`)."""
    shown = steps[-limit:]
    lines = [f"{'…' + str(len(steps) - limit) + ' earlier calls left out' if len(steps) > limit else ''}"]
    for s in shown:
        lines.append(f"- turn {s.turn}: {s.key} -> {'ERROR' if s.is_error else 'ok'}: {s.result}")
    return "\n".join(line for line in lines if line) or "(no tool calls)"


def run_user_text(session: Session, run_id: str) -> str:
    """The text of the message that started run `run_id` ('' if not in the log)."""
    seq = session.inbound_seqs.get(run_id)
    if seq is None:
        return ""
    for r in reversed(session.records):
        if r.get("seq") == seq:
            return str(r.get("text") or "")
    return ""
