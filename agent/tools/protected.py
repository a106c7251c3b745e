"""Which workspace paths steer the agent for its owner, so writing them needs the owner's yes.

One list for every route: write_file and edit_file ask before writing one, and exec runs with
them mounted read-only (agent/tools/mounts.py) unless the call was approved for it. They are the
prompt files (SOUL.md, AGENTS.md, USER.md, TOOLS.md, HEARTBEAT.md, MEMORY.md), skills/, exec's
HOME (the dotfiles programs read when they start: .bashrc, .gitconfig, .npmrc, Python's user
site-packages and its .pth files) and config.toml and state/ when the workspace holds them. In
a tainted run the memory logs (memory/) are added: writing them is a lasting effect.
"""

from __future__ import annotations

import os
from pathlib import Path

from clawgate.config.paths import Paths
from clawgate.workspace.guard import PROMPT_FILES, WorkspaceGuard

from .sandbox import TMP_NAME

PROTECTED_DIRS = ("skills",)
HOME_NAME = f"{TMP_NAME}/home"  # exec's HOME, relative to the workspace (shell.py `_scratch_env`)
MEMORY_DIR = "memory"


def protected_entries(root: Path, *, memory: bool = False) -> list[tuple[Path, bool]]:
    """(path, is_folder) for everything protected under the (real) workspace `root`."""
    entries = [(root / name, False) for name in sorted(PROMPT_FILES)]
    entries += [(root / name, True) for name in (*PROTECTED_DIRS, HOME_NAME)]
    if memory:
        entries.append((root / MEMORY_DIR, True))
    paths = Paths.from_env()
    for secret, folder in ((paths.config_file, False), (paths.state, True)):
        real = Path(os.path.realpath(secret))
        if real != root and root in real.parents:
            entries.append((real, folder))
    return entries


def protected_reason(workspace: WorkspaceGuard, user_path: str, *, memory: bool = False) -> str | None:
    """Why writing `user_path` changes how the agent behaves, or None for an ordinary file.

    Checked on the path as given and on its real path, and against the real paths of the
    protected entries, so a symlink to SOUL.md (or from it) is caught either way.
    """
    root = workspace.root
    lexical = Path(os.path.normpath(root / user_path))
    try:  # the real path by the same descriptor walk the write will take (no realpath race)
        with workspace.locate(user_path) as loc:
            real = root / loc.relative
    except ValueError:
        return None  # refused when it runs
    except OSError:  # a folder on the way is missing (it will be created) or changed meanwhile
        real = lexical
    for entry, folder in protected_entries(root, memory=memory):
        try:
            targets = {entry, Path(os.path.realpath(entry))}
        except OSError:  # a program is swapping folders under it right now: its name still counts
            targets = {entry}
        for candidate in (real, lexical):
            if any(candidate == t or (folder and t in candidate.parents) for t in targets):
                return f"{workspace.relative(entry)} {_what(entry, root)}; writing it needs the owner's approval"
    return None


def _what(entry: Path, root: Path) -> str:
    relative = str(entry.relative_to(root))
    if relative == HOME_NAME:
        return "is the HOME of exec's programs (dotfiles there run when a program starts)"
    if relative == MEMORY_DIR:
        return "holds the memory logs"
    if relative in PROMPT_FILES or relative in PROTECTED_DIRS:
        return "is part of every session's instructions"
    return "is clawgate's own configuration or state"
