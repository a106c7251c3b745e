"""What each `exec` call changed in the workspace, recorded so a replay can put it back.

A restore with files ("both") rolls the workspace back; replaying the branch afterwards re-runs
file-tool writes (they repeat nothing), but a command is never run again. Without its changes the
replayed branch would disagree with its own transcript (the command "made report.txt", the file
is not there). So the checkpoint observer snapshots the workspace when a command is about to run
and again when it returned, and keeps the difference: the paths it changed and the tree after it
(`effects/<call id>.json`; the files themselves are in the checkpoint store's blobs). On replay
those paths are put back as the command left them. A call with no record (taken before this
existed, or lost) stops the replay before the model turn that made it: that turn runs live.

Limits: the workspace is shared, so a change another session made while the command ran is
counted as the command's; a background command's changes after it moved to the background are
not recorded (its replayed result says it went to the background; the job is not started again).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from ..core.fsio import atomic_write_bytes
from .workspace_store import StoreError, WorkspaceStore

log = logging.getLogger(__name__)
EFFECT_TOOLS = frozenset({"exec"})


class Effects:
    """Each person has a workspace of their own: `files_of(user)` gives the store of the workspace a
    command ran in, and a record names that person so its replay puts files back in the same one."""

    def __init__(self, folder: Path, files_of: Callable[[str], WorkspaceStore]) -> None:
        self.folder = folder
        self.files_of = files_of
        self._before: dict[str, tuple[str, str]] = {}  # call id -> (person, the workspace tree when it started)

    def _path(self, call_id: str) -> Path:
        return self.folder / (quote(call_id, safe="") + ".json")

    def started(self, call_id: str, user: str = "") -> None:
        try:
            self._before[call_id] = (user, self.files_of(user).snapshot())
        except (OSError, StoreError) as exc:  # the command still runs; its replay will go live
            log.warning("workspace snapshot before command %s failed: %s", call_id, exc)

    def finished(self, session_key: str, call_id: str) -> None:
        started = self._before.pop(call_id, None)
        if started is None:
            return
        user, before = started
        files = self.files_of(user)
        try:
            after = files.snapshot()
            old, new = files.tree(before), files.tree(after)
        except (OSError, StoreError) as exc:
            log.warning("workspace snapshot after command %s failed: %s", call_id, exc)
            return
        paths = sorted(p for p in set(old) | set(new) if old.get(p) != new.get(p))
        record = {"session": session_key, "id": call_id, "user": user, "tree": after, "paths": paths,
                  "time": time.time()}
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self._path(call_id), json.dumps(record).encode(), fsync=False)

    def get(self, call_id: str) -> dict[str, Any] | None:
        try:
            record = json.loads(self._path(call_id).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) and isinstance(record.get("paths"), list) else None

    def reapply(self, call_id: str) -> list[str] | None:
        """Put the paths the call changed back as it left them; None: nothing recorded (or unreadable)."""
        record = self.get(call_id)
        if record is None:
            return None
        paths = [str(p) for p in record["paths"]]
        if paths:
            try:
                self.files_of(str(record.get("user") or "")).restore(str(record["tree"]), only=set(paths))
            except (OSError, StoreError) as exc:
                log.warning("could not put back what command %s changed: %s", call_id, exc)
                return None
        return paths

    def trees(self) -> set[str]:
        """Trees the records name (kept by the blob collection)."""
        found = set()
        for path in self.folder.glob("*.json") if self.folder.exists() else []:
            try:
                found.add(str(json.loads(path.read_text(encoding="utf-8"))["tree"]))
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return found

    def prune(self, keep_days: float, now: float | None = None) -> int:
        """Records older than checkpoints are kept go with them."""
        cutoff = (time.time() if now is None else now) - keep_days * 86400
        removed = 0
        for path in self.folder.glob("*.json") if self.folder.exists() else []:
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except OSError:
                continue
        return removed
