"""Confine file and shell access to the workspace.

A path is allowed only if its fully resolved real path (symlinks followed) lies inside the
workspace's real path. `..`, absolute paths elsewhere and symlinks pointing out are refused.
`resolve` answers by path (for exec's checks and approvals); the file tools open files with
`locate`, which pins the path to a folder descriptor (workspace/fdpath.py) so that nothing
swapped in between the check and the use can lead them out.
"""

from __future__ import annotations

import os
from pathlib import Path


from .fdpath import Location, PathOutsideWorkspace, locate

__all__ = ["Location", "PathOutsideWorkspace", "PROMPT_FILES", "WorkspaceGuard"]


# Files that become part of every session's system prompt (agent/context/builder.py), plus the skills:
# whoever writes them steers the owner's sessions.
PROMPT_FILES = frozenset({"SOUL.md", "AGENTS.md", "USER.md", "TOOLS.md", "MEMORY.md", "HEARTBEAT.md"})


class WorkspaceGuard:
    def __init__(self, root: Path) -> None:
        if not root.exists():
            root.mkdir(parents=True, mode=0o700)  # it holds the owner's files: user-only when we create it
        self.root = root.resolve(strict=True)

    def steers_prompt(self, real: Path) -> bool:
        """True for a (resolved) path whose content reaches the system prompt of every session."""
        relative = self.relative(real)
        return relative in PROMPT_FILES or relative == "skills" or relative.startswith("skills" + os.sep)

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

    def locate(self, user_path: str, *, create_folders: bool = False) -> Location:
        """`user_path` pinned to an open folder descriptor and a name in it; raises
        PathOutsideWorkspace (one line) for a path leading out, OSError for the rest."""
        return locate(self.root, user_path, create_folders=create_folders)

    def relative(self, real: Path) -> str:
        return "." if real == self.root else str(real.relative_to(self.root))
