"""Drift signals (agent/supervision/drift.py) and structured answers (agent/supervision/structured.py), without I/O."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from clawgate.agent.supervision.drift import Action, RunView, action_key, hard_limit, lexical_relevance, reflection_due, signals
from clawgate.agent.supervision.structured import parse
from clawgate.config.schema import DriftSettings

S = DriftSettings(window=6, repeat_threshold=3, failing_retry_threshold=2, no_progress_turns=4,
                  relevance_threshold=0.2, reflect_every=5, max_tool_calls=20, max_wall_seconds=100,
                  max_history_tokens=10_000, scope_ratio=0.75)


def act(turn: int, name: str, args: dict, *, error: bool = False, progress: bool = False) -> Action:
    return Action(turn=turn, name=name, key=action_key(name, args), is_error=error,
                  text=f"{name} " + " ".join(map(str, args.values())), progress=progress)


def names(view: RunView) -> list[str]:
    return [s.name for s in signals(view, S)]


def test_key_arguments_make_calls_the_same_and_noise_does_not():
    assert action_key("read_file", {"path": "a.txt", "max_bytes": 10}) == action_key("read_file", {"path": "a.txt"})
    assert action_key("read_file", {"path": "a.txt"}) != action_key("read_file", {"path": "b.txt"})
    assert action_key("mystery", {"x": 1}) != action_key("mystery", {"x": 2})  # unknown tools: all arguments
    assert len(action_key("write_file", {"path": "p", "content": "x" * 5000})) < 400


def test_the_same_call_three_times_in_the_window_is_a_loop_two_is_not():
    two = [act(i, "exec", {"argv": ["make", "test"]}) for i in (1, 2)] + [act(3, "read_file", {"path": "test.log"})]
    assert "loop" not in names(RunView(goal="make test pass", actions=two, turns=3))
    three = two + [act(4, "exec", {"argv": ["make", "test"]})]
    [loop] = [s for s in signals(RunView(goal="make test pass", actions=three, turns=4), S) if s.name == "loop"]
    assert loop.value == 3 and loop.threshold == 3 and "exec" in loop.detail
    # outside the window (6 calls) the old repeats no longer count
    spread = three + [act(5 + i, "read_file", {"path": f"test{i}.log"}) for i in range(5)]
    assert "loop" not in names(RunView(goal="make test pass", actions=spread, turns=10))


def test_a_failing_call_retried_is_its_own_signal_and_a_success_clears_it():
    fails = [act(i, "exec", {"argv": ["pytest"]}, error=True) for i in (1, 2, 3)]
    [sig] = [s for s in signals(RunView(goal="pytest green", actions=fails, turns=3), S) if s.name == "failing_retry"]
    assert sig.value == 2  # failed, then retried twice
    healed = fails + [act(4, "exec", {"argv": ["pytest"]})]
    assert "failing_retry" not in names(RunView(goal="pytest green", actions=healed, turns=4))


def test_no_progress_counts_turns_since_the_last_plan_update_only_with_a_task():
    acts = [act(1, "task", {"action": "start", "step": 1}, progress=True),
            *[act(i, "read_file", {"path": f"report{i}.md"}) for i in range(2, 6)]]
    view = RunView(goal="write the report", actions=acts, turns=5, has_task=True)
    assert "no_progress" in names(view)  # 4 turns since turn 1
    view.turns = 4
    assert "no_progress" not in names(view)
    assert "no_progress" not in names(RunView(goal="write the report", actions=acts, turns=9, has_task=False))


def test_scope_creep_at_the_soft_ratio_and_the_hard_limit_at_the_limit():
    view = RunView(goal="g", total_tool_calls=15)
    assert "scope_tool_calls" in names(view) and hard_limit(view, S) is None
    view.total_tool_calls = 20
    limit = hard_limit(view, S)
    assert limit is not None and limit.name == "limit_tool_calls" and "scope_tool_calls" not in names(view)
    assert hard_limit(RunView(goal="g", elapsed_seconds=100.5), S).name == "limit_wall_seconds"
    assert hard_limit(RunView(goal="g", history_tokens=10_000), S).name == "limit_history_tokens"


def test_relevance_is_low_when_recent_calls_never_touch_the_goal():
    goal = "Fix the failing parser tests in parser.py"
    on = [act(i, "read_file", {"path": p}) for i, p in enumerate(["parser.py", "tests/test_parser.py", "README",
                                                                   "parser.py.bak", "setup.cfg", "notes"], 1)]
    assert "relevance" not in names(RunView(goal=goal, actions=on, turns=6))
    off = [act(i, "web_fetch", {"url": f"https://news.example/{t}"}) for i, t in
           enumerate(["football", "weather", "recipes", "movies", "music", "travel"], 1)]
    [sig] = [s for s in signals(RunView(goal=goal, actions=off, turns=6), S) if s.name == "relevance"]
    assert sig.value == 0.0
    assert lexical_relevance("write tests", ["pytest testing module"]) == [1.0]  # crude stems meet


def test_periodic_reflection_every_n_turns():
    due = [t for t in range(1, 16) if reflection_due(RunView(goal="g", total_turns=t), S)]
    assert due == [5, 10, 15]
    assert not reflection_due(RunView(goal="g", total_turns=10), S.model_copy(update={"reflect_every": 0}))


class Shape(BaseModel):
    ok: bool
    why: str


def test_structured_parse_takes_fenced_or_bare_json_and_names_what_is_wrong():
    assert parse('Sure!\n```json\n{"ok": true, "why": "x"}\n```', Shape).ok is True
    assert parse('{"ok": false, "why": "y"} trailing', Shape).why == "y"
    with pytest.raises(ValueError, match="no JSON object"):
        parse("I think it is complete.", Shape)
    with pytest.raises(ValueError, match="field why"):
        parse('{"ok": true}', Shape)
    with pytest.raises(ValueError, match="invalid JSON"):
        parse('{"ok": true, why: }', Shape)
