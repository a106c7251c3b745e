"""Confine file and shell access to the workspace.

A path is allowed only if its fully resolved real path (symlinks followed) lies inside the
workspace's real path. `..`, absolute paths elsewhere and symlinks pointing out are refused.
"""

from __future__ import annotations

import os
from pathlib import Path


class PathOutsideWorkspace(ValueError):
    """Raised for any path that would reach outside the workspace."""


class WorkspaceGuard:
    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root.resolve(strict=True)

    def resolve(self, user_path: str) -> Path:
        """Return the real path for `user_path` (relative to the workspace) or raise."""
        if "\x00" in user_path:
            raise PathOutsideWorkspace("path contains a NUL byte")
        candidate = Path(user_path).expanduser()
        if not candidate.is_absolute():
            candidate = self.root / candidate
        real = Path(os.path.realpath(candidate))
        if real != self.root and self.root not in real.parents:
            raise PathOutsideWorkspace(
                f"{user_path!r} is outside the workspace {self.root}; use a path relative to the workspace"
            )
        return real

    def relative(self, real: Path) -> str:
        return "." if real == self.root else str(real.relative_to(self.root))
