"""`--json` output: one key style (camelCase, like the gateway's payloads) for every command.

Some payloads still carry snake_case keys (a task's stored fields, the status queue counts);
converting at the one printing point keeps every `--json` consistent whether the data came
from the daemon or from the files.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Values under these keys are user data (a task's free-form context; MCP servers keyed by the names the
# owner gave them), not field names: kept as is.
_VERBATIM = frozenset({"context", "mcp"})
_SNAKE = re.compile(r"_([a-z0-9])")


def camel(key: str) -> str:
    """`updated_at` -> `updatedAt`; keys without an inner underscore are unchanged."""
    head, rest = key[:1], key[1:]
    return head + _SNAKE.sub(lambda m: m.group(1).upper(), rest)


def camel_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {camel(k) if isinstance(k, str) else k: (v if k in _VERBATIM else camel_keys(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [camel_keys(v) for v in value]
    return value


def print_json(value: Any) -> None:
    print(json.dumps(camel_keys(value), indent=2, ensure_ascii=False))
