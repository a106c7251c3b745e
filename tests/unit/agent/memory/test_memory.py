"""MEMORY.md facts, the daily log and the memory tools through the real ToolRegistry."""

from __future__ import annotations

import time

import pytest

from clawgate.agent.memory.store import Memory, MemoryProblem
from tests.context_helpers import registry, tool_context, workspace
from tests.untrusted_support import unwrap

NOON = time.mktime((2025, 6, 1, 12, 30, 0, 0, 0, -1))


def test_append_fact_adds_one_line_and_never_duplicates(tmp_path):
    root = workspace(tmp_path)
    memory = Memory(root)
    before = (root / "MEMORY.md").read_text()
    assert memory.append_fact("The user's   name is\nAda") == "added to MEMORY.md: The user's name is Ada"
    assert memory.append_fact("- The user's name is Ada").startswith("already in MEMORY.md")
    text = (root / "MEMORY.md").read_text()
    assert text.startswith(before) and text.count("The user's name is Ada") == 1
    assert memory.facts() == ["The user's name is Ada"]


def test_append_creates_the_file_when_missing_and_rejects_empty_or_huge(tmp_path):
    memory = Memory(tmp_path)
    memory.append_fact("deploys go to prod.example.com:8443")
    assert (tmp_path / "MEMORY.md").read_text().endswith("- deploys go to prod.example.com:8443\n")
    with pytest.raises(MemoryProblem, match="empty"):
        memory.append_fact("   ")
    with pytest.raises(MemoryProblem, match="keep it under"):
        memory.append_fact("x" * 700)


def test_replace_changes_exactly_one_fact_and_leaves_the_rest_byte_identical(tmp_path):
    memory = Memory(tmp_path)
    for fact in ("likes tea", "works at ACME on project Falcon", "time zone Europe/Berlin"):
        memory.append_fact(fact)
    before = (tmp_path / "MEMORY.md").read_text()
    result = memory.replace_fact("project Falcon", "project Osprey")
    assert "'- works at ACME on project Falcon' -> '- works at ACME on project Osprey'" in result
    after = (tmp_path / "MEMORY.md").read_text()
    assert after == before.replace("project Falcon", "project Osprey")
    memory.replace_fact("likes tea", "")
    assert memory.facts() == ["works at ACME on project Osprey", "time zone Europe/Berlin"]


def test_replace_refuses_missing_and_ambiguous_matches_without_touching_the_file(tmp_path):
    memory = Memory(tmp_path)
    memory.append_fact("likes green tea")
    memory.append_fact("likes black tea")
    before = (tmp_path / "MEMORY.md").read_text()
    with pytest.raises(MemoryProblem, match="2 lines of MEMORY.md contain"):
        memory.replace_fact("tea", "coffee")
    with pytest.raises(MemoryProblem, match="no line of MEMORY.md contains"):
        memory.replace_fact("likes rooibos", "x")
    assert (tmp_path / "MEMORY.md").read_text() == before


def test_daily_log_is_append_only_with_a_dated_file(tmp_path):
    memory = Memory(tmp_path, clock=lambda: NOON)
    path = memory.log("started the migration")
    assert path == tmp_path / "memory" / "2025-06-01.md"
    first = path.read_text()
    memory.log("- step 1 verified", title="session main · consolidated up to seq 9")
    text = path.read_text()
    assert text.startswith(first)
    assert text == ("# 2025-06-01\n\n- 12:30 started the migration\n"
                    "\n## 12:30 · session main · consolidated up to seq 9\n- step 1 verified\n")


def test_archive_never_overwrites(tmp_path):
    memory = Memory(tmp_path)
    a = memory.archive("main-seq1-9", "one")
    b = memory.archive("main-seq1-9", "two")
    assert a != b and a.read_text() == "one" and b.read_text() == "two"
    assert a.parent == tmp_path / "memory" / "archive"


async def test_memory_tools_end_to_end_through_the_registry(tmp_path):
    root = workspace(tmp_path)
    tools = registry()
    ctx = tool_context(root)

    async def call(name, **args):
        return await tools.execute({"id": name, "name": name, "input": args}, ctx)

    added = await call("memory_append", text="Prefers answers in German")
    assert not added.is_error and "added to MEMORY.md" in added.content
    assert "- Prefers answers in German" in (root / "MEMORY.md").read_text()
    daily = await call("memory_append", text="deployed v1.4.2", daily=True)
    assert daily.content.startswith("appended to memory/") and daily.content.endswith(".md")
    replaced = await call("memory_replace", old="in German", new="in English")
    assert not replaced.is_error and "in English" in (root / "MEMORY.md").read_text()
    missing = await call("memory_replace", old="in French", new="x")
    assert missing.is_error and missing.content.startswith("error: no line of MEMORY.md contains that text")
    assert "\nfix: copy it exactly from MEMORY.md" in missing.content
    got = await call("memory_get", path="MEMORY.md", line=1, count=2)
    assert unwrap(got.content).splitlines()[0] == "    1\t# MEMORY"
    outside = await call("memory_get", path="../secrets.txt")
    assert outside.is_error and "outside the workspace" in outside.content
    bad = await call("memory_get", path="sessions/../../etc/passwd")
    assert bad.is_error and "not a transcript" in bad.content
