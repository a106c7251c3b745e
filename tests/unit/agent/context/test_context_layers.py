"""The layered system prompt, its modes, caps and cache breakpoints (ContextBuilder, no sockets)."""

from __future__ import annotations

import logging

from clawgate.agent.context.builder import CACHE, PLATFORM_RULES
from clawgate.agent.session import Session
from clawgate.agent.tasks.store import Step, Task, TaskStore
from tests.context_helpers import answer, builder, tool_context, tool_round, user, workspace

FILES = {"SOUL.md": "soul-marker", "AGENTS.md": "agents-marker", "USER.md": "user-marker",
         "TOOLS.md": "tools-marker", "MEMORY.md": "memory-marker", "HEARTBEAT.md": "- heartbeat-marker"}


def _fill(root):
    for name, text in FILES.items():
        (root / name).write_text(f"# {name}\n{text}\n")


def test_normal_mode_layer_order_is_exact(tmp_path):
    root = workspace(tmp_path)
    _fill(root)
    ctx = builder(root)
    names = [layer.name for layer in ctx.layers("normal")]
    assert names == ["platform", "identity", "user", "memory", "skills"]
    system = "\n".join(b["text"] for b in ctx.system_blocks("normal"))
    order = ["You are a personal agent running inside clawgate", "soul-marker", "agents-marker", "user-marker",
             "tools-marker", "memory-marker", "# Skills"]
    positions = [system.index(marker) for marker in order]
    assert positions == sorted(positions)
    assert "heartbeat-marker" not in system
    assert "[runtime]" not in system.split("Lines starting with")[0]  # nothing dynamic in the system prompt


def test_subagent_mode_has_only_platform_and_workspace_notes(tmp_path):
    root = workspace(tmp_path)
    _fill(root)
    ctx = builder(root)
    assert [layer.name for layer in ctx.layers("subagent")] == ["platform", "workspace"]
    system = "\n".join(b["text"] for b in ctx.system_blocks("subagent"))
    assert "agents-marker" in system and "tools-marker" in system and "You are a sub-agent" in system
    for absent in ("memory-marker", "soul-marker", "user-marker", "# Skills", "heartbeat-marker"):
        assert absent not in system


def test_heartbeat_mode_has_heartbeat_file_and_active_task_states(tmp_path):
    root = workspace(tmp_path)
    _fill(root)
    store = TaskStore(tmp_path / "tasks", fsync=False)
    task = Task(goal="migrate the blog", session_key="main", status="in_progress",
                steps=[Step("export posts", "done"), Step("import posts")])
    store.save(task)
    store.save(Task(goal="old finished thing", session_key="main", status="completed"))
    ctx = builder(root)
    ctx.active_tasks = lambda: [t.status_line() for t in store.active()]
    assert [layer.name for layer in ctx.layers("heartbeat")] == ["platform", "heartbeat", "tasks"]
    system = "\n".join(b["text"] for b in ctx.system_blocks("heartbeat"))
    assert "heartbeat-marker" in system and "HEARTBEAT_OK" in system
    assert task.status_line() in system and "old finished thing" not in system
    for absent in ("memory-marker", "soul-marker", "user-marker", "agents-marker", "# Skills"):
        assert absent not in system


def test_heartbeat_task_states_are_frozen_within_a_run_and_fresh_for_the_next(tmp_path):
    root = workspace(tmp_path)
    lines = ["task t_1 [in_progress] goal — step 1/2: a"]
    ctx = builder(root)
    ctx.active_tasks = lambda: list(lines)
    session = Session("hb", tmp_path / "hb.jsonl", fsync=False)
    user(session, "heartbeat tick", ctx)
    first = ctx.build(session, "heartbeat")
    lines[0] = "task t_1 [in_progress] goal — step 2/2: b"
    tool_round(session, "list_dir", {"path": "."}, "a.txt")
    assert ctx.build(session, "heartbeat").system == first.system  # same run: byte-identical
    answer(session, "HEARTBEAT_OK")
    user(session, "heartbeat tick", ctx)
    assert "step 2/2: b" in ctx.build(session, "heartbeat").system[-1]["text"]  # next run: re-read


def test_missing_and_empty_files_are_skipped(tmp_path):
    root = tmp_path / "bare"
    root.mkdir()
    (root / "SOUL.md").write_text("soul only\n")
    (root / "USER.md").write_text("   \n")
    ctx = builder(root)
    layers = ctx.layers("normal")
    assert [layer.name for layer in layers] == ["platform", "identity"]
    assert "# USER.md" not in layers[-1].text and "# AGENTS.md" not in layers[-1].text


def test_per_file_cap_leaves_a_visible_marker(tmp_path):
    root = workspace(tmp_path)
    (root / "MEMORY.md").write_text("- fact\n" * 5000)
    ctx = builder(root)
    ctx.caps["MEMORY.md"] = 500
    memory = next(layer for layer in ctx.layers() if layer.name == "memory")
    assert "[… MEMORY.md truncated:" in memory.text and "more characters; read the file for the rest]" in memory.text
    assert len(memory.text) < 700
    soul = next(layer for layer in ctx.layers() if layer.name == "identity")
    assert "truncated" not in soul.text  # other files keep their own caps


def test_cache_breakpoints_and_stable_tool_order(tmp_path):
    root = workspace(tmp_path)
    ctx = builder(root)
    session = Session("s", tmp_path / "s.jsonl", fsync=False)
    user(session, "hello", ctx)
    request = ctx.build(session)
    marked = [i for i, b in enumerate(request.system) if "cache_control" in b]
    assert marked == [len(request.system) - 1] and request.system[-1]["cache_control"] == CACHE
    tool_marks = [i for i, t in enumerate(request.tools) if "cache_control" in t]
    assert tool_marks == [len(request.tools) - 1]
    names = [t["name"] for t in request.tools]
    assert names == sorted(names) and {"load_skill", "memory_append", "memory_replace", "memory_search",
                                       "memory_get"} <= set(names)
    assert request.cache_control == CACHE  # the automatic breakpoint at the end of the messages
    assert not any("cache_control" in b for m in request.messages for b in m["content"])
    # the volatile runtime block lives in the user turn, not before any breakpoint
    assert request.messages[0]["content"][0]["text"].startswith("[runtime] time: ")
    assert "channel: gateway · chat: s" in request.messages[0]["content"][0]["text"]


def test_system_prompt_is_frozen_until_invalidated(tmp_path):
    root = workspace(tmp_path)
    ctx = builder(root)
    session = Session("s", tmp_path / "s.jsonl", fsync=False)
    user(session, "hello", ctx)
    before = ctx.build(session).system
    (root / "MEMORY.md").write_text("# MEMORY\n- the user likes tea\n")
    assert ctx.build(session).system == before
    ctx.invalidate("s")
    assert "the user likes tea" in "".join(b["text"] for b in ctx.build(session).system)


def test_platform_rules_name_the_workspace(tmp_path):
    root = workspace(tmp_path)
    assert str(root) in builder(root).layers()[0].text
    assert PLATFORM_RULES.startswith("You are a personal agent")


def test_broken_skill_is_skipped_with_one_warning(tmp_path, caplog):
    root = workspace(tmp_path)
    broken = root / "skills" / "broken" / "SKILL.md"
    broken.parent.mkdir(parents=True)
    broken.write_text("---\nname: [unclosed\ndescription: x\n---\nbody\n")
    nofront = root / "skills" / "nofront" / "SKILL.md"
    nofront.parent.mkdir(parents=True)
    nofront.write_text("just text, no frontmatter\n")
    (root / "skills" / "drafts").mkdir()  # a folder without SKILL.md and a loose file: not skills, no warning
    (root / "skills" / "README.txt").write_text("notes\n")
    ctx = builder(root)
    with caplog.at_level(logging.WARNING, logger="clawgate.agent.context.skills"):
        for _ in range(3):
            index = ctx.skills_index()
    assert index is not None
    lines = [line for line in index.splitlines() if line.startswith("- ")]
    assert [line.split(":")[0] for line in lines] == ["- browser", "- code-change", "- long-task", "- memory"]
    warnings = [r.getMessage() for r in caplog.records]
    assert len([w for w in warnings if "skills/broken/" in w]) == 1
    assert len([w for w in warnings if "skills/nofront/" in w]) == 1 and len(warnings) == 2
    assert all("skipped" in w for w in warnings)


def test_shipped_skills_are_valid_routing_conditions(tmp_path):
    root = workspace(tmp_path)
    index = builder(root).skills_index()
    assert index is not None
    for line in [line for line in index.splitlines() if line.startswith("- ")]:
        assert "Use when" in line and "Don't use" in line and len(line) <= 220


async def test_load_skill_returns_the_body_and_names_choices_on_a_miss(tmp_path):
    from tests.context_helpers import registry
    root = workspace(tmp_path)
    tools = registry()
    found = await tools.execute({"id": "1", "name": "load_skill", "input": {"name": "Long-Task"}}, tool_context(root))
    assert not found.is_error
    assert found.content.startswith("# Skill: long-task (skills/long-task/SKILL.md)")
    assert "One step at a time" in found.content and "description:" not in found.content
    missing = await tools.execute({"id": "2", "name": "load_skill", "input": {"name": "deploy"}}, tool_context(root))
    assert missing.is_error and "no skill named 'deploy'" in missing.content
    assert "browser, code-change, long-task, memory" in missing.content


def test_html_comments_are_for_humans_only(tmp_path):
    root = workspace(tmp_path)
    (root / "USER.md").write_text("# USER\n<!-- editing hint:\nkeep it short -->\nName: Ada\n")
    user_layer = next(layer for layer in builder(root).layers() if layer.name == "user")
    assert "Name: Ada" in user_layer.text and "editing hint" not in user_layer.text


def test_skill_index_is_parsed_once_and_again_after_an_edit(tmp_path, monkeypatch) -> None:
    import os

    import yaml

    from clawgate.agent.context import skills as skills_module

    skill = tmp_path / "skills" / "notes" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: notes\ndescription: first words\n---\nbody\n")
    assert [s.description for s in skills_module.load_skills(tmp_path / "skills")] == ["first words"]
    calls = []
    real = yaml.safe_load  # skills.py imports yaml when it first parses a skill
    monkeypatch.setattr(yaml, "safe_load", lambda text: calls.append(text) or real(text))
    skills_module.load_skills(tmp_path / "skills")
    assert calls == []  # unchanged file: not parsed again
    skill.write_text("---\nname: notes\ndescription: other words here\n---\nbody\n")
    st = skill.stat()
    os.utime(skill, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert [s.description for s in skills_module.load_skills(tmp_path / "skills")] == ["other words here"]
    assert len(calls) == 1


def test_a_new_session_reuses_the_last_prompt_until_a_file_or_skill_changes(tmp_path, monkeypatch) -> None:
    """Sessions opened with the same files share one assembled prompt; any edit, a new skill or a guest's
    own memory gives the next new session a prompt assembled again, with the change in it."""
    import os

    root = workspace(tmp_path)
    _fill(root)
    ctx = builder(root)

    def prompt_of(key: str) -> list:
        session = Session(key, tmp_path / f"{key}.jsonl", fsync=False)
        user(session, "hello", ctx)
        return ctx.build(session).system

    first = prompt_of("a")
    assembled = []
    real = ctx.system_blocks
    monkeypatch.setattr(ctx, "system_blocks", lambda *args: assembled.append(args) or real(*args))
    assert prompt_of("b") is first and assembled == []  # nothing changed: not assembled again

    def touch(path, text):
        path.write_text(text)
        st = path.stat()  # a later mtime even on a coarse clock
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))

    touch(root / "USER.md", "# USER\nName: Ada\n")
    changed = prompt_of("c")
    assert "Name: Ada" in "".join(b["text"] for b in changed) and len(assembled) == 1
    assert prompt_of("a") is first  # a session that exists keeps the prompt it froze
    skill = root / "skills" / "brew" / "SKILL.md"
    skill.parent.mkdir(parents=True, exist_ok=True)
    touch(skill, "---\nname: brew\ndescription: make tea the way the user likes\n---\nbody\n")
    assert "make tea the way" in "".join(b["text"] for b in prompt_of("d")) and len(assembled) == 2
    (root / "SOUL.md").unlink()
    assert "soul-marker" not in "".join(b["text"] for b in prompt_of("e")) and len(assembled) == 3
    assert prompt_of("f") == prompt_of("e") and len(assembled) == 3
