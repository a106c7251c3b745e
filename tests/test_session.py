"""The session log: projection to model messages, crash tolerance, O(1) appends."""

from __future__ import annotations

import time

from agent.session import SessionManager


def test_projection_keeps_internal_events_out(tmp_path):
    s = SessionManager(tmp_path).get("k")
    s.append("user", text="hi", context="[runtime]")
    s.append("event", name="compaction_done")
    s.append("assistant", content=[{"type": "tool_use", "id": "t1", "name": "list_dir", "input": {}}])
    s.append("tool_intent", id="t1", name="list_dir", input={})
    s.append("tool_done", id="t1", content="a.txt", is_error=False)
    s.append("tool_results", results=[{"tool_use_id": "t1", "content": "a.txt"}])
    s.append("assistant", content=[{"type": "text", "text": "there is a.txt"}])
    roles = [(m["role"], [b["type"] for b in m["content"]]) for m in s.llm_messages()]
    assert roles == [("user", ["text", "text"]), ("assistant", ["tool_use"]), ("user", ["tool_result"]),
                     ("assistant", ["text"])]


def test_reload_gives_identical_projection(tmp_path):
    s = SessionManager(tmp_path).get("telegram:1")
    s.append("user", text="a")
    s.append("assistant", content=[{"type": "text", "text": "b"}])
    again = SessionManager(tmp_path).get("telegram:1")
    assert again.llm_messages() == s.llm_messages() and again.seq == s.seq


def test_torn_final_line_is_dropped_and_appends_continue(tmp_path):
    manager = SessionManager(tmp_path)
    s = manager.get("k")
    s.append("user", text="a")
    s.close()
    with open(s.path, "a") as fh:
        fh.write('{"seq": 2, "kind": "assis')
    reloaded = SessionManager(tmp_path).get("k")
    assert len(reloaded.records) == 1
    reloaded.append("assistant", content=[{"type": "text", "text": "ok"}])
    assert len(SessionManager(tmp_path).get("k").records) == 2


def test_corrupt_middle_line_is_skipped_not_fatal(tmp_path):
    s = SessionManager(tmp_path).get("k")
    s.append("user", text="a")
    s.close()
    with open(s.path, "a") as fh:
        fh.write("garbage\n")
    s2 = SessionManager(tmp_path).get("k")
    s2.append("assistant", content=[{"type": "text", "text": "b"}])
    assert [r["kind"] for r in SessionManager(tmp_path).get("k").records] == ["user", "assistant"]


def test_unanswered_tool_use_gets_an_interrupted_result(tmp_path):
    s = SessionManager(tmp_path).get("k")
    s.append("user", text="go")
    s.append("assistant", content=[{"type": "tool_use", "id": "t9", "name": "exec", "input": {}}])
    assert [c["id"] for c in s.pending_tool_calls()] == ["t9"]
    s.append("user", text="next")
    last = s.llm_messages()[-1]["content"]
    assert last[0]["type"] == "tool_result" and last[0]["tool_use_id"] == "t9" and last[0]["is_error"]


def test_append_cost_does_not_grow_with_length(tmp_path):
    s = SessionManager(tmp_path, fsync=False).get("k")

    def cost(n: int = 300) -> float:
        """Best of three batches: robust to a busy machine, still sensitive to O(history) work."""
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            for i in range(n):
                s.append("event", name="x", i=i)
            best = min(best, (time.perf_counter() - start) / n)
        return best

    early = cost()
    for i in range(9000):
        s.append("event", name="fill", i=i)
    late = cost()
    assert late < early * 4, (early, late)


def test_keys_survive_odd_characters_and_reset_archives(tmp_path):
    manager = SessionManager(tmp_path)
    manager.get("telegram:-100/5").append("user", text="x")
    assert manager.keys() == ["telegram:-100/5"]
    assert manager.reset("telegram:-100/5")
    assert manager.keys() == []
