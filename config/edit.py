"""Edits of config.toml that keep what the owner wrote: comments, order and layout (tomlkit), for
`clawgate agents add|remove|bind|unbind`. Every edit is checked as the daemon would load it before
the file is replaced (atomically, user-only), so a refused edit leaves the file as it was."""

from __future__ import annotations

import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any, Callable

import tomlkit
from tomlkit.items import AoT, Table

from .loader import ConfigError, validate
from .paths import Paths


def _read(path: Path) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
    except tomlkit.exceptions.ParseError as exc:
        raise ConfigError(f"config error: {path} is not valid TOML ({exc}); fix the line it names") from None


def edit(paths: Paths, change: Callable[[tomlkit.TOMLDocument], None]) -> None:
    """Apply `change` to config.toml, check the result (ConfigError: nothing written), replace the file."""
    path = paths.config_file
    doc = _read(path)
    change(doc)
    text = tomlkit.dumps(doc)
    validate(tomllib.loads(text))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config.", suffix=".toml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def agents_table(doc: tomlkit.TOMLDocument) -> Table:
    if "agents" not in doc:
        doc["agents"] = tomlkit.table(is_super_table=True)
    table = doc["agents"]
    assert isinstance(table, Table)
    return table


def bindings_array(doc: tomlkit.TOMLDocument) -> AoT:
    if "bindings" not in doc:
        doc["bindings"] = tomlkit.aot()
    array = doc["bindings"]
    if not isinstance(array, AoT):
        raise ConfigError("config error: bindings in config.toml is not written as [[bindings]] tables; "
                          "rewrite it that way to edit it with `clawgate agents`")
    return array


def binding_table(agent: str, match: dict[str, Any]) -> Table:
    table = tomlkit.table()
    table["agent"] = agent
    inline = tomlkit.inline_table()
    inline.update(match)
    table["match"] = inline
    return table


__all__ = ["agents_table", "binding_table", "bindings_array", "edit"]
