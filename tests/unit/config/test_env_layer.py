"""The environment layer's plain path (no pydantic-settings import) gives what pydantic-settings gives."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

from pydantic import BaseModel

from clawgate.config.loader import ENV_PREFIX, _plain, _plain_overrides, _read_env, env_overrides, load
from clawgate.config.schema import Settings


def leaves(model: type[BaseModel], path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every setting reachable through nested sections, with its type."""
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from leaves(annotation, (*path, name))
        else:
            yield (*path, name), annotation


def variable(path: tuple[str, ...]) -> str:
    return ENV_PREFIX + "__".join(part.upper() for part in path)


def test_every_plain_setting_reads_as_pydantic_settings_reads_it() -> None:
    plain = [path for path, annotation in leaves(Settings) if _plain(annotation)]
    assert len(plain) > 100  # the schema's text, number, flag and choice settings, not a handful
    for index, path in enumerate(plain):
        named = {variable(path): f"value {index} [x]"}
        assert _plain_overrides(named) == _read_env(named), path
    together = {variable(path): str(index) for index, path in enumerate(plain)}
    assert _plain_overrides(together) == _read_env(together)


def test_a_list_or_table_setting_goes_to_pydantic_settings() -> None:
    others = [path for path, annotation in leaves(Settings) if not _plain(annotation)]
    assert ("gateway", "allowed_origins") in others
    for path in others:
        assert _plain_overrides({variable(path): "[]"}) is None, path
    # one such variable among plain ones: all are read by pydantic-settings, JSON parsed
    mixed = {"CLAWGATE_GATEWAY__PORT": "19000", "CLAWGATE_GATEWAY__ALLOWED_ORIGINS": '["http://localhost:3000"]'}
    assert env_overrides(mixed) == {"gateway": {"port": "19000", "allowed_origins": ["http://localhost:3000"]}}
    assert _plain_overrides({"CLAWGATE_GATEWAY": '{"port": 1}'}) is None  # a whole section as JSON


def test_loading_plain_variables_does_not_import_pydantic_settings(tmp_path: Path) -> None:
    code = ("import sys; from pathlib import Path; from clawgate.config.loader import load; "
            f"_, s = load(Path({str(tmp_path)!r}), environ={{'CLAWGATE_GATEWAY__PORT': '19001', "
            "'CLAWGATE_DRIFT__ENABLED': 'false'}); "
            "print(s.gateway.port, s.drift.enabled, 'pydantic_settings' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["19001", "False", "False"]
    _, settings = load(tmp_path, environ={"CLAWGATE_GATEWAY__PORT": "19001", "CLAWGATE_DRIFT__ENABLED": "false"})
    assert (settings.gateway.port, settings.drift.enabled) == (19001, False)
