"""What the agent itself wrote: the sha256 of each workspace file after its last write_file/edit_file.

read_file shows a file as plain text only when its current content is exactly what the agent
last wrote there; anything else (a file the user placed, a download, a file someone changed
after the agent wrote it) is shown as untrusted data. The ledger lives outside the workspace
(in state/, see config/paths.py) so nothing inside the workspace can vouch for itself.

Cheap by design: one entry per path (the latest write), at most `max_entries` paths (the
least recently written are forgotten, which only makes reads of those files wrapped), one
small atomic JSON write per recorded write. A missing or damaged ledger file is an empty
ledger: the safe direction.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from ..core.fsio import atomic_write_text

log = logging.getLogger(__name__)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class WrittenLedger:
    def __init__(self, path: Path | None = None, *, max_entries: int = 5000) -> None:
        self.path = path  # None: kept in memory only (tests, a daemon without state)
        self.max_entries = max_entries
        self._entries: dict[str, dict[str, int | str]] | None = None

    def _load(self) -> dict[str, dict[str, int | str]]:
        if self._entries is None:
            self._entries = {}
            if self.path is not None:
                try:
                    raw = json.loads(self.path.read_text(encoding="utf-8"))
                    if isinstance(raw, dict):
                        self._entries = {str(k): v for k, v in raw.items()
                                         if isinstance(v, dict) and isinstance(v.get("sha256"), str)
                                         and isinstance(v.get("size"), int)}
                except FileNotFoundError:
                    pass
                except (OSError, ValueError) as exc:
                    log.warning("written-files ledger %s unreadable (%s); treating every file as not written "
                                "by the agent", self.path, exc)
        return self._entries

    def record(self, relative: str, data: bytes) -> None:
        """The agent wrote `data` to workspace path `relative`."""
        entries = self._load()
        entries.pop(relative, None)
        entries[relative] = {"sha256": digest(data), "size": len(data)}
        while len(entries) > self.max_entries:
            del entries[next(iter(entries))]
        if self.path is not None:
            try:
                atomic_write_text(self.path, json.dumps(entries, separators=(",", ":")), fsync=False)
            except OSError as exc:  # the write itself succeeded; only trust in it is lost
                log.warning("could not update the written-files ledger %s: %s", self.path, exc)

    def expects(self, relative: str) -> tuple[int, str] | None:
        """(size, sha256) of the agent's last write to `relative`, or None."""
        entry = self._load().get(relative)
        return (int(entry["size"]), str(entry["sha256"])) if entry else None

    def wrote(self, relative: str, data: bytes) -> bool:
        """Is `data` exactly what the agent last wrote to `relative`?"""
        expected = self.expects(relative)
        return expected is not None and expected == (len(data), digest(data))
