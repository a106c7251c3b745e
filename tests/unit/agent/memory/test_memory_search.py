"""memory_search: BM25 over memory files and transcripts, hits with file and line."""

from __future__ import annotations

from clawgate.agent.memory.store import Memory
from clawgate.agent.memory.search import MemorySearch, tokenize
from clawgate.agent.session import Session
from tests.context_helpers import answer, registry, tool_context, tool_round, user, workspace
from tests.untrusted_support import unwrap


def _corpus(tmp_path):
    root = workspace(tmp_path)
    sessions = tmp_path / "sessions"
    memory = Memory(root, clock=lambda: 1_750_000_000.0)
    memory.append_fact("The staging database runs on db-stage.internal:5433")
    memory.append_fact("The user prefers short answers")
    log = memory.log("Rotated the nginx certificate; expires 2026-01-01")
    session = Session("work", sessions / "work.jsonl", fsync=False)
    user(session, "why does the backup job fail?")
    tool_round(session, "exec", {"argv": ["cat", "backup.log"]}, "ERROR: disk quota exceeded on /var/backups")
    answer(session, "The backup fails because the disk quota on /var/backups is exceeded.")
    return root, sessions, log, session


def test_hits_name_file_and_line_ranked_by_relevance(tmp_path):
    root, sessions, log, _ = _corpus(tmp_path)
    index = MemorySearch(root, sessions)
    hits = index.search("staging database port")
    assert hits[0].file == "MEMORY.md"
    lines = (root / "MEMORY.md").read_text().splitlines()
    assert "db-stage.internal:5433" in lines[hits[0].line - 1]
    cert = index.search("nginx certificate")[0]
    assert cert.file == f"memory/{log.name}" and "Rotated the nginx" in log.read_text().splitlines()[cert.line - 1]


def test_transcripts_are_searched_with_line_and_seq(tmp_path):
    root, sessions, _, session = _corpus(tmp_path)
    hits = MemorySearch(root, sessions).search("disk quota backups", limit=5)
    assert {h.file for h in hits} == {"sessions/work.jsonl"}
    top = hits[0]
    record_line = (sessions / "work.jsonl").read_text().splitlines()[top.line - 1]
    assert f'"seq":{top.seq},' in record_line and "quota" in record_line
    assert "quota" in top.text


def test_index_follows_appends_and_ignores_its_own_echoes(tmp_path):
    root, sessions, _, session = _corpus(tmp_path)
    index = MemorySearch(root, sessions)
    assert index.search("kubernetes") == []
    user(session, "please set up kubernetes on the new box")
    tool_round(session, "memory_search", {"query": "kubernetes"}, "sessions/work.jsonl:9 kubernetes …")
    hits = index.search("kubernetes")
    assert len(hits) == 1 and hits[0].text.startswith("user: please set up kubernetes")


def test_cjk_text_is_searchable_by_bigrams(tmp_path):
    root = workspace(tmp_path)
    Memory(root).append_fact("用户喜欢在周末部署服务")
    assert "部署" in tokenize("部署服务")
    hits = MemorySearch(root).search("部署")
    assert hits and hits[0].file == "MEMORY.md"


async def test_memory_search_tool_renders_hits(tmp_path):
    root, sessions, _, _ = _corpus(tmp_path)
    tools = registry(sessions)
    out = await tools.execute({"id": "s", "name": "memory_search", "input": {"query": "db-stage"}}, tool_context(root))
    assert not out.is_error and unwrap(out.content).startswith("MEMORY.md:")
    none = await tools.execute({"id": "n", "name": "memory_search", "input": {"query": "zebra"}}, tool_context(root))
    assert none.content.startswith("no matches for 'zebra'")


def test_the_index_follows_rewrites_and_deletions_of_the_files(tmp_path):
    root, sessions, log, _ = _corpus(tmp_path)
    index = MemorySearch(root, sessions)
    assert index.search("nginx certificate")[0].file == f"memory/{log.name}"
    log.write_text("# log\n- renewed the apache certificate\n")
    assert [h.file for h in index.search("nginx")] == []
    assert index.search("apache")[0].line == 2
    (sessions / "work.jsonl").unlink()
    assert index.search("quota") == [] and index.search("staging")[0].file == "MEMORY.md"


def test_a_damaged_index_is_rebuilt_from_the_files(tmp_path, caplog):
    root, sessions, _, _ = _corpus(tmp_path)
    index = MemorySearch(root, sessions)
    before = index.search("disk quota backups")
    assert before
    index._db.execute("UPDATE docs_data SET block = x'0102030405060708'")  # FTS5's own pages, garbled
    index._db.commit()
    assert index.search("disk quota backups") == before
    assert any("rebuilding it from the memory files" in r.getMessage() for r in caplog.records)


def test_a_guest_ranking_does_not_depend_on_files_it_cannot_see(tmp_path):
    """bm25() over the whole index would let a guest read the owner's memory from its scores."""
    root = workspace(tmp_path)
    sessions = tmp_path / "sessions"
    guest = Session("guest", sessions / "guest.jsonl", fsync=False)
    user(guest, "how do I restart kubernetes pods")
    user(guest, "and what about the database")
    own = lambda name: name == "sessions/guest.jsonl"  # noqa: E731
    scores = {}
    for memory_text in ("", "- kubernetes cluster notes\n" * 40):
        (root / "MEMORY.md").write_text("# Memory\n- unrelated line\n" + memory_text)
        index = MemorySearch(root, sessions)
        scores[bool(memory_text)] = ([h.score for h in index.search("kubernetes", visible=own)],
                                     [h.score for h in index.search("kubernetes") if h.file != "MEMORY.md"])
    assert scores[True][0] == scores[False][0] and scores[True][0]  # the guest's own view: unchanged
    assert scores[True][1] != scores[False][1]  # the owner's (whole-index) view does change
