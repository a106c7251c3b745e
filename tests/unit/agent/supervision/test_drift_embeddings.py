"""The embedding relevance score against a small OpenAI-compatible /embeddings server on loopback."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from clawgate.agent.memory.embeddings import EmbeddingRelevance, cosine
from clawgate.config.schema import Settings
from tests.drift_support import REFLECT, build, reflection
from tests.fakes.anthropic_api import tool_use
from tests.harness import free_port

PARSING = ("parser", "grammar", "tokenizer", "syntax", "lexer", "ast")


class _Embeddings(BaseHTTPRequestHandler):
    """Two topics: anything about parsing points one way, everything else the other."""

    calls: list[list[str]] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        inputs = body["input"]
        type(self).calls.append(inputs)
        data = [{"index": i, "embedding": [1.0, 0.1] if any(w in t.lower() for w in PARSING) else [0.1, 1.0]}
                for i, t in enumerate(inputs)]
        payload = json.dumps({"data": data, "model": body["model"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def embeddings() -> Iterator[str]:
    _Embeddings.calls = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Embeddings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


async def test_embedding_scores_and_their_cache(embeddings: str):
    scorer = EmbeddingRelevance(embeddings, "test-embed", min_similarity=0.5)
    try:
        goal = "Fix the failing parser tests"
        assert await scorer.scores(goal, ["read_file grammar.y", "web_fetch football"]) == [1.0, 0.0]
        assert await scorer.scores(goal, ["read_file grammar.y"]) == [1.0]
        assert len(_Embeddings.calls) == 1  # the second question was answered from the cache
    finally:
        await scorer.close()
    assert cosine([1.0, 0.0], [0.0, 1.0]) == 0.0 and cosine([0.0, 0.0], [1.0, 0.0]) == 0.0


async def test_an_unreachable_endpoint_yields_none_so_the_lexical_score_is_used():
    scorer = EmbeddingRelevance(f"http://127.0.0.1:{free_port()}/v1", "m", timeout=2.0)
    try:
        assert await scorer.scores("goal", ["x"]) is None
    finally:
        await scorer.close()


SYNONYMS = ["grammar.y", "tokenizer.c", "syntax.md", "lexer.c", "ast.h", "grammar.txt"]


async def _off_goal_signals(tmp_path: Path, fake_model, embedder: EmbeddingRelevance | None) -> list[str]:
    s = Settings()
    s.drift = s.drift.model_copy(update={"reflect_every": 0})
    s.reflection.enabled = False
    rig = build(tmp_path, fake_model, s)
    control = rig.loop.after_turn[0]
    control.embedder = embedder
    fake_model.enqueue(*[tool_use("read_file", {"path": p}) for p in SYNONYMS], tool_use("list_dir", {"path": "."}))
    fake_model.enqueue_for(REFLECT, reflection(True))
    fake_model.enqueue(*[tool_use("list_dir", {"path": f"d{i}"}) for i in range(3)])
    await rig.send("Fix the failing parser tests")
    return [e["signal"] for e in rig.log_events("drift_signal")]


async def test_embeddings_see_what_shared_words_miss(tmp_path: Path, fake_model, embeddings: str):
    # Six reads of parsing files that never say "parser": the lexical score calls it a side quest…
    assert "relevance" in await _off_goal_signals(tmp_path / "lexical", fake_model, None)
    fake_model.reset()
    # …the embedding score knows grammar.y is about the parser.
    scorer = EmbeddingRelevance(embeddings, "test-embed")
    try:
        assert "relevance" not in await _off_goal_signals(tmp_path / "embedded", fake_model, scorer)
    finally:
        await scorer.close()
    assert _Embeddings.calls and "Fix the failing parser tests" in _Embeddings.calls[0]
