"""Drift signals, computed from what the run did — never by asking the model.

Pure functions over a `RunView` (the actions of a task or run, its goal, its counters), so every
threshold is unit-testable without sockets, clocks or files. agent/supervision/drift_control.py builds the
view from the session log and applies the correction ladder; this module only measures.

Signals (each with its value and threshold, recorded in the trace):
- `loop`           the same call (name + key arguments) `repeat_threshold` times in the window
- `failing_retry`  a call that failed was retried and failed again `failing_retry_threshold` times
- `no_progress`    `no_progress_turns` turns without a task-plan update (only when a task exists)
- `scope_*`        tool calls / wall time / history past `scope_ratio` of the hard limits
- `relevance`      too few recent actions touch the goal's words (a cheap lexical score; an
                   embedding scorer can replace it, see `Relevance`)
Hard limits (`limit_*`) are the same counters at 100%: they stop the run.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from clawgate.config.schema import DriftSettings

# The arguments that make two calls "the same" for the tools whose other arguments are noise.
KEY_ARGS: dict[str, tuple[str, ...]] = {
    "exec": ("argv", "command", "cwd"),
    "read_file": ("path",),
    "write_file": ("path", "content"),
    "edit_file": ("path", "old", "new", "old_text", "new_text"),
    "list_dir": ("path",),
    "web_fetch": ("url",),
    "web_search": ("query",),
    "memory_search": ("query",),
}
BOOKKEEPING = {"task"}  # plan updates: progress, not actions on the goal
VALUE_CAP = 300
_WORD = re.compile(r"[^\W_]{3,}", re.UNICODE)
STOPWORDS = frozenset(
    "the and for with that this from into then than them they you your are was were has have had not but all "
    "any can could should would will just only also each every some make made use using used run runs file "
    "files please need needs want wants done step steps task tasks".split()
)


@dataclass(frozen=True)
class Action:
    """One tool call of the run, as the signals see it."""

    turn: int  # 1-based model turn that made the call
    name: str
    key: str  # name + canonical key arguments (see action_key)
    is_error: bool = False
    text: str = ""  # words of the call for the relevance score
    progress: bool = False  # a successful task-plan update


@dataclass
class RunView:
    goal: str
    actions: list[Action] = field(default_factory=list)  # since the last correction (soft signals)
    turns: int = 0  # model turns since the last correction
    total_tool_calls: int = 0  # since the task (or run) began: the hard limit counts these
    total_turns: int = 0
    elapsed_seconds: float = 0.0
    history_tokens: int = 0
    has_task: bool = False


@dataclass(frozen=True)
class Signal:
    name: str
    value: float
    threshold: float
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"signal": self.name, "value": round(self.value, 3), "threshold": self.threshold, "detail": self.detail}


class Relevance(Protocol):
    """Scores how much each recent action is about the goal (0..1 per action)."""

    def __call__(self, goal: str, texts: list[str]) -> list[float]: ...


def action_key(name: str, args: Any) -> str:
    """`name(k=v, …)` over the tool's key arguments (all of them for tools not listed), canonical JSON."""
    if not isinstance(args, dict):
        return f"{name}({_cap(json.dumps(args, sort_keys=True, default=str))})"
    keys = KEY_ARGS.get(name)
    picked = {k: args[k] for k in sorted(args) if keys is None or k in keys}
    body = ", ".join(f"{k}={_cap(json.dumps(v, sort_keys=True, ensure_ascii=False, default=str))}" for k, v in picked.items())
    return f"{name}({body})"


def _cap(text: str) -> str:
    return text if len(text) <= VALUE_CAP else text[:VALUE_CAP] + f"…[{len(text)}]"


def words(text: str) -> set[str]:
    """Content words, folded and crudely stemmed so `tests`/`testing`/`tested` meet."""
    return {_stem(w) for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in STOPWORDS}


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:6]


def lexical_relevance(goal: str, texts: list[str]) -> list[float]:
    """1.0 for an action sharing a content word with the goal, else 0.0."""
    goal_words = words(goal)
    return [1.0 if goal_words & words(t) else 0.0 for t in texts]


def signals(view: RunView, s: DriftSettings, relevance: Relevance = lexical_relevance) -> list[Signal]:
    """Every soft signal the view shows now, in ladder order of seriousness (loops first)."""
    found: list[Signal] = []
    recent = [a for a in view.actions if a.name not in BOOKKEEPING][-s.window:]
    counts = Counter(a.key for a in recent)
    if counts:
        key, n = counts.most_common(1)[0]
        if n >= s.repeat_threshold:
            found.append(Signal("loop", n, s.repeat_threshold, f"{key} {n}x in the last {len(recent)} calls"))
    failing = _failing_retries(view.actions)
    if failing is not None and failing[1] >= s.failing_retry_threshold:
        found.append(Signal("failing_retry", failing[1], s.failing_retry_threshold,
                            f"{failing[0]} failed and was retried {failing[1]}x"))
    if view.has_task:
        since = _turns_since_progress(view)
        if since >= s.no_progress_turns:
            found.append(Signal("no_progress", since, s.no_progress_turns, f"{since} turns without a plan update"))
    for name, value, limit in _counters(view, s):
        if value >= s.scope_ratio * limit and value < limit:
            found.append(Signal(f"scope_{name}", value, round(s.scope_ratio * limit, 1),
                                f"{name} at {value:g} of a limit of {limit:g}"))
    if s.relevance_threshold > 0 and len(recent) >= s.window and view.goal.strip():
        scores = relevance(view.goal, [a.text for a in recent])
        score = sum(scores) / len(scores)
        if score < s.relevance_threshold:
            found.append(Signal("relevance", score, s.relevance_threshold,
                                f"{sum(1 for x in scores if x > 0)}/{len(scores)} recent calls touch the goal"))
    return found


def hard_limit(view: RunView, s: DriftSettings) -> Signal | None:
    """The first hard limit reached (the run must stop), or None."""
    for name, value, limit in _counters(view, s):
        if value >= limit:
            return Signal(f"limit_{name}", value, limit, f"{name} reached {value:g} (limit {limit:g})")
    return None


def reflection_due(view: RunView, s: DriftSettings) -> bool:
    """The periodic reflection: every `reflect_every` turns of the task or run."""
    return s.reflect_every > 0 and view.total_turns > 0 and view.total_turns % s.reflect_every == 0


def _counters(view: RunView, s: DriftSettings) -> list[tuple[str, float, float]]:
    return [("tool_calls", view.total_tool_calls, s.max_tool_calls),
            ("wall_seconds", round(view.elapsed_seconds, 1), s.max_wall_seconds),
            ("history_tokens", view.history_tokens, s.max_history_tokens)]


def _failing_retries(actions: list[Action]) -> tuple[str, int] | None:
    """The latest failing call and how often it was retried and failed again (consecutive failures
    of the same key, counting other calls in between as not breaking the streak)."""
    streak: Counter[str] = Counter()
    last: str | None = None
    for a in actions:
        if a.name in BOOKKEEPING:
            continue
        if a.is_error:
            streak[a.key] += 1
            last = a.key
        else:
            streak.pop(a.key, None)
    if last is None or streak[last] < 2:
        return None
    return last, streak[last] - 1


def _turns_since_progress(view: RunView) -> int:
    last = max((a.turn for a in view.actions if a.progress), default=0)
    return view.turns - last


def summarise_failures(actions: list[Action], errors: dict[str, str] | None = None, limit: int = 5) -> list[str]:
    """Failure patterns for a reset brief: each failing call, how often, and its first error line."""
    counts = Counter(a.key for a in actions if a.is_error)
    errors = errors or {}
    return [f"{key} failed {n}x" + (f": {errors[key]}" if errors.get(key) else "") for key, n in counts.most_common(limit)]

