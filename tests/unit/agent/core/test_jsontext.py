"""The hot writers' encoder gives json.dumps's exact text, and its errors."""

from __future__ import annotations

import json
import math
import threading
from typing import Any

import pytest

from clawgate.agent.core import jsontext


class Opaque:
    def __str__(self) -> str:
        return "opaque ✓"


VALUES: list[Any] = [
    {"seq": 1, "ts": 1732843200.123, "kind": "user", "text": "héllo \"wörld\"\n\t\u2028 😀", "none": None, "t": True},
    {"content": [{"type": "text", "text": "x" * 300}, {"type": "tool_use", "id": "t1", "input": {"a": [1, 2.5, -0.0]}}]},
    {1: "int key", 2.5: "float key", False: "bool key", None: "null key"},
    ["top", "level", "list", 1e300, -1e-300, 10**30],
    "a lone string with \\ and \x00",
    42,
    {"nan": math.nan, "inf": math.inf},
    {"nested": {"deeper": {"deepest": []}}, "empty": {}},
]


@pytest.mark.parametrize("compact", [False, True])
@pytest.mark.parametrize("value", VALUES)
def test_the_same_text_as_json_dumps(value: Any, compact: bool) -> None:
    separators = (",", ":") if compact else None
    assert jsontext.encoder(compact=compact)(value) == json.dumps(value, ensure_ascii=False, separators=separators)


def test_default_is_used_as_json_dumps_uses_it() -> None:
    value = {"when": Opaque(), "list": [Opaque()]}
    expected = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    assert jsontext.encoder(compact=True, default=str)(value) == expected


def test_errors_are_json_dumps_errors() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        jsontext.encoder()({"x": Opaque()})
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ValueError, match="Circular reference"):
        jsontext.encoder()(loop)


def test_threads_encoding_at_once_do_not_disturb_each_other() -> None:
    """Each call has its own circular-reference check: a shared one would see another thread's objects."""
    encode = jsontext.encoder(compact=True, default=str)
    value = {"items": [{"n": n, "o": Opaque()} for n in range(200)]}
    expected = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    failures: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(300):
                assert encode(value) == expected
        except BaseException as exc:  # reported below: a thread's assertion would be lost otherwise
            failures.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not failures and not any(t.is_alive() for t in threads)


def test_without_the_c_encoder_it_is_json_dumps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsontext._std, "c_make_encoder", None)
    value = VALUES[0]
    assert jsontext.encoder(compact=True)(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
