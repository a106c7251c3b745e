"""Relevance by embeddings: the goal and each recent call embedded by an OpenAI-compatible
`/embeddings` endpoint (a local Ollama or vLLM), compared by cosine similarity.

Optional (`drift.embedding_url`): the lexical score in agent/supervision/drift.py needs nothing and is the
default. Embeddings catch what shared words miss ("grammar.y" is about "the parser"). When the
endpoint fails, the caller falls back to the lexical score for that turn; a drift signal must
never depend on a service being up.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import httpx  # imported only when drift.embedding_url is set (gateway/app.py)

log = logging.getLogger(__name__)


class EmbeddingRelevance:
    def __init__(self, base_url: str, model: str, *, min_similarity: float = 0.5, timeout: float = 10.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.model = model
        self.min_similarity = min_similarity
        self._client = httpx.AsyncClient(base_url=base_url.rstrip("/") + "/", timeout=timeout, transport=transport)
        self._cache: dict[str, list[float]] = {}  # goal and call texts repeat from turn to turn

    async def scores(self, goal: str, texts: list[str]) -> list[float] | None:
        """1.0 for each text at least `min_similarity` close to the goal, else 0.0; None when the
        endpoint could not answer (the caller uses the lexical score)."""
        wanted = [t for t in dict.fromkeys([goal, *texts]) if t not in self._cache]
        if wanted:
            try:
                vectors = await self._embed(wanted)
            except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
                log.warning("embedding relevance unavailable (%s); using the lexical score", str(exc)[:200] or type(exc).__name__)
                return None
            self._cache.update(zip(wanted, vectors))
            if len(self._cache) > 512:
                for key in list(self._cache)[:256]:
                    del self._cache[key]
        goal_vec = self._cache[goal]
        return [1.0 if cosine(goal_vec, self._cache[t]) >= self.min_similarity else 0.0 for t in texts]

    async def _embed(self, inputs: list[str]) -> list[list[float]]:
        reply = await self._client.post("embeddings", json={"model": self.model, "input": inputs})
        reply.raise_for_status()
        data: Any = reply.json()["data"]
        vectors = [item["embedding"] for item in sorted(data, key=lambda d: d.get("index", 0))]
        if len(vectors) != len(inputs) or not all(isinstance(v, list) and v for v in vectors):
            raise ValueError("the endpoint returned the wrong number of embeddings")
        return [[float(x) for x in v] for v in vectors]

    async def close(self) -> None:
        await self._client.aclose()


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0
