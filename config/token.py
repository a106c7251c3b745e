"""The gateway token: from config, or generated once and kept user-only in the state folder.

The gateway always requires a token. When `gateway.token` is not configured, the daemon creates
one on first start at `$CLAWGATE_HOME/state/gateway.token` (0600) and reuses it afterwards; local
clients (`clawgate chat`, `tasks`, `cron` …) read the same file, so nothing has to be copied.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from typing import Any

from .paths import Paths


def gateway_token(paths: Paths, settings: Any, *, create: bool = False) -> str | None:
    """The token the gateway expects: `gateway.token` if set, else the state file's.

    With `create` (the daemon), a missing or empty file is generated; without it (clients),
    a missing file gives None.
    """
    configured = settings.gateway.token
    if configured:
        return configured
    path = paths.gateway_token_file
    existing = _read(path)
    if existing or not create:
        if existing and create:
            os.chmod(path, 0o600)  # tighten a file someone loosened
        return existing
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".gateway.token.", suffix=".tmp")  # created 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(token + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():  # present but empty (torn): replace it
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)  # atomic and never overwrites a token another process just wrote
            except FileExistsError:
                pass
            except OSError:  # a filesystem without hard links
                os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return _read(path)


def _read(path: os.PathLike[str]) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip() or None
    except FileNotFoundError:
        return None
