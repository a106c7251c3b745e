"""Tool arguments, gateway method parameters and the supervisors' answers are pydantic models built
after the ready line (gateway/runtime.py), not while the daemon imports its modules. A fresh
interpreter shows both halves: the import leaves them unbuilt, and the warm-up builds every one of
them (a model whose annotations cannot be resolved would fail here, not at a person's first call)."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = r"""
import asyncio, json, logging
from pydantic import BaseModel
import clawgate.gateway.app  # everything a daemon's start imports
from clawgate.agent.tools.base import Args
from clawgate.agent.tools.files import ReadFile
from clawgate.gateway.methods import REGISTRY
from clawgate.gateway.runtime import build_deferred_models, deferred_models

errors = []
class Collect(logging.Handler):
    def emit(self, record): errors.append(record.getMessage())
logging.getLogger("clawgate.gateway.runtime").addHandler(Collect())

before = sorted(f"{m.__module__}.{m.__qualname__}" for m in deferred_models(BaseModel))
built = asyncio.run(build_deferred_models())
after = [m.__qualname__ for m in deferred_models(BaseModel)]
print(json.dumps({"before": before, "built": built, "after": after, "errors": errors,
                  "read_file_complete": ReadFile.Arguments.__pydantic_complete__,
                  "methods": len(REGISTRY),
                  "chat_send_complete": REGISTRY["chat.send"].params.__pydantic_complete__}))
"""


def test_the_start_leaves_them_unbuilt_and_the_warm_up_builds_them_all() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    before = found["before"]
    assert "clawgate.agent.tools.files.ReadFile.Arguments" in before
    assert "clawgate.gateway.api.chat.ChatSend" in before
    assert "clawgate.agent.supervision.completeness.Check" in before
    assert len(before) >= 30, before
    assert found["errors"] == []
    assert found["built"] == len(before)
    assert found["after"] == []
    assert found["read_file_complete"] and found["chat_send_complete"]


def test_a_model_used_before_the_warm_up_builds_itself() -> None:
    """A client's call can arrive in the first milliseconds after ready: validation builds the model."""
    from clawgate.agent.tools.files import ReadFile

    args = ReadFile.Arguments.model_validate({"path": "notes.md"})
    assert args.path == "notes.md"
    assert ReadFile.Arguments.__pydantic_complete__
    assert "path" in ReadFile.Arguments.model_json_schema()["properties"]
