"""Structured answers from the model: one JSON object, validated, retried once, else None.

Why a module of its own: the drift reflection and the completeness check both ask the model a
question whose answer decides something (stop? complete?). A malformed answer must never be
read as "yes": it is retried once with the parse error named, and then the caller fails safe.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from ..providers.base import ModelRequest, Provider, ProviderError

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


@dataclass
class Answer(Generic[T]):
    value: T | None  # None: no valid answer after the retry (the caller fails safe)
    calls: int  # model calls spent
    tokens: int  # input + output tokens spent
    error: str = ""  # why the last attempt was rejected


def parse(text: str, model: type[T]) -> T:
    """The first JSON object in `text` (bare or in a ``` fence), validated against `model`."""
    fenced = _FENCE.search(text)
    candidate = fenced.group(1) if fenced else text
    start, end = candidate.find("{"), candidate.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object in the answer")
    try:
        data = json.loads(candidate[start:end + 1])
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg} at position {exc.pos}") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"field {'.'.join(str(p) for p in first['loc']) or '(root)'}: {first['msg']}") from None


async def ask(provider: Provider, *, model: str, system: str, prompt: str, schema: type[T],
              max_tokens: int = 1024) -> Answer[T]:
    """Ask once; on a malformed answer ask again naming the problem; then give up (value None)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
    calls = tokens = 0
    error = ""
    for attempt in range(2):
        request = ModelRequest(model=model, system=[{"type": "text", "text": system}], messages=messages,
                               max_tokens=max_tokens)
        try:
            response = await provider.complete(request)
        except ProviderError as exc:
            return Answer(None, calls, tokens, f"model unavailable: {exc}")
        calls += 1
        tokens += int(response.usage.get("input_tokens", 0)) + int(response.usage.get("output_tokens", 0))
        try:
            return Answer(parse(response.text, schema), calls, tokens)
        except ValueError as exc:
            error = str(exc)
            log.warning("structured answer rejected (attempt %d): %s", attempt + 1, error)
        messages = messages + [
            {"role": "assistant", "content": [{"type": "text", "text": response.text or "(empty)"}]},
            {"role": "user", "content": [{"type": "text", "text": (
                f"That answer could not be used ({error}). Reply with only the JSON object, no other text.")}]},
        ]
    return Answer(None, calls, tokens, error)
