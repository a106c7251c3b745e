"""Compaction of old tool results in the model's view: deterministic, coarse, reversible."""

from __future__ import annotations

from clawgate.agent.context.compaction import Compactor
from clawgate.agent.session import Session
from tests.context_helpers import answer, builder, dumps, registry, tool_context, tool_round, user, workspace


def _heavy_session(path, turns: int, size: int = 3_000) -> Session:
    session = Session("heavy", path, fsync=False)
    for turn in range(turns):
        user(session, f"turn {turn}: read the next log")
        tool_round(session, "read_file", {"path": f"logs/{turn}.log"}, f"log {turn} " + "x" * size)
        answer(session, f"log {turn} read")
    return session


def test_old_big_results_become_placeholders_naming_file_and_seq(tmp_path):
    session = _heavy_session(tmp_path / "heavy.jsonl", 20)
    compactor = Compactor(keep=6, chunk_chars=10_000, min_chars=600)
    view = compactor.view(session, 0)
    raw = session.llm_messages(0)
    assert len(view) == len(raw)
    placeholders = [b["content"] for m in view for b in m["content"]
                    if b.get("type") == "tool_result" and b["content"].startswith("[compacted:")]
    assert placeholders, "a tool-heavy history must be compacted"
    first = placeholders[0]
    seq = session.message_seq(2)  # the first tool_results message
    assert f'memory_get(path="sessions/heavy.jsonl", seq={seq})' in first
    assert "read_file output, 3006 chars" in first and 'began "log 0 xxx' in first
    # the newest messages stay raw, and the history on disk is untouched
    assert view[-6:] == raw[-6:]
    assert all(b["content"].startswith("log ") for m in raw for b in m["content"] if b.get("type") == "tool_result")
    assert sum(len(dumps(m)) for m in view) < sum(len(dumps(m)) for m in raw) / 2


def test_small_results_are_never_compacted(tmp_path):
    session = _heavy_session(tmp_path / "small.jsonl", 30, size=100)
    assert Compactor(keep=4, chunk_chars=500, min_chars=600).view(session, 0) == session.llm_messages(0)


def test_projection_is_deterministic_across_restarts(tmp_path):
    path = tmp_path / "heavy.jsonl"
    session = _heavy_session(path, 25)
    live = Compactor(keep=6, chunk_chars=10_000)
    views = [live.view(session, 0)]  # built incrementally, as the loop does
    session.close()
    reopened = Session("heavy", path, fsync=False)
    assert Compactor(keep=6, chunk_chars=10_000).view(reopened, 0) == views[0]


def test_boundary_moves_in_coarse_jumps_and_keeps_the_prefix_up_to_the_old_boundary(tmp_path):
    session = Session("grow", tmp_path / "grow.jsonl", fsync=False)
    compactor = Compactor(keep=6, chunk_chars=12_000)
    previous: list | None = None
    boundaries = []
    identical = broken = 0
    for turn in range(40):
        user(session, f"turn {turn}")
        tool_round(session, "read_file", {"path": f"f{turn}"}, "y" * 2_000)
        view = compactor.view(session, 0)
        boundary = compactor.boundary(session, 0)
        if previous is not None:
            if view[: len(previous)] == previous:
                identical += 1
            else:
                broken += 1
                old = boundaries[-1]
                assert view[:old] == previous[:old]  # only the newly compacted stretch changed
        boundaries.append(boundary)
        answer(session, "ok")
        previous = compactor.view(session, 0)
    jumps = len(set(boundaries)) - 1
    assert 2 <= jumps <= 8 and broken == jumps and identical == 39 - jumps


async def test_memory_get_reads_back_a_compacted_output(tmp_path):
    root = workspace(tmp_path)
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    session = _heavy_session(sessions / "heavy.jsonl", 12)
    view = Compactor(keep=4, chunk_chars=5_000).view(session, 0)
    placeholder = next(b["content"] for m in view for b in m["content"]
                       if b.get("type") == "tool_result" and b["content"].startswith("[compacted:"))
    seq = int(placeholder.split("seq=")[1].split(")")[0])
    out = await registry(sessions).execute(
        {"id": "g", "name": "memory_get", "input": {"path": "sessions/heavy.jsonl", "seq": seq, "count": 1}},
        tool_context(root))
    assert not out.is_error
    assert f"seq {seq} · tool result: log 0 " + "x" * 3000 in out.content


def test_builder_uses_the_compacted_view(tmp_path):
    root = workspace(tmp_path)
    ctx = builder(root, compactor=Compactor(keep=4, chunk_chars=4_000))
    session = _heavy_session(tmp_path / "heavy.jsonl", 10)
    user(session, "and now?", ctx)
    messages = ctx.build(session).messages
    assert any(b.get("content", "").startswith("[compacted:") for m in messages for b in m["content"]
               if b.get("type") == "tool_result")
    assert messages[-1]["content"][-1]["text"] == "and now?"
