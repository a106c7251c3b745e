"""Which workspace root a person gets: the owner's, or a guest's own.

A guest (anyone a channel admits who is not an owner) must not reach the owner's files by any
route: file tools, exec, memory, checkpoints, sub-agents, cron. The simplest boundary that holds
for all of them is a separate root: every guest gets `<guests>/<user>/` and every route works
inside the root of the person the run acts for. The owner's workspace is not inside a guest's
root, and a guest's root is not inside the owner's (both are folders of CLAWGATE_HOME).

Programs started by exec also get a HOME and TMPDIR per person, outside every workspace (under
the state folder): what one person's programs leave there (`.gitconfig`, `.npmrc`, a `.pth`,
shell rc files) is never read by another person's programs, and a file tool cannot plant them.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Callable

from clawgate.config.agents import agent_id_of

from .guard import WorkspaceGuard

# An agent's (workspace, guests' folders, exec scratch) by its id (config/agents.py): every agent but the
# default one has its own, so a run of one agent never works in another's files.
AgentFolders = Callable[[str], tuple[Path, Path, Path]]

OWNER = ""  # the user key of the owner; a guest's is "<channel>:<id>"
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_MAX_NAME = 80


def folder_name(user: str) -> str:
    """A file name for a user key: readable, no separators, bounded; distinct keys give distinct names
    (anything unsafe or long is replaced, so a digest of the whole key is appended)."""
    safe = _SAFE.sub("_", user)
    if safe == user and len(safe) <= _MAX_NAME and safe not in (".", ".."):
        return safe
    return f"{safe[:_MAX_NAME]}-{hashlib.sha256(user.encode('utf-8')).hexdigest()[:16]}"


class Workspaces:
    """The owner's workspace guard plus one guard per guest, created (0700) on first use."""

    def __init__(self, owner: WorkspaceGuard, guests: Path, scratch: Path, *,
                 agents: AgentFolders | None = None) -> None:
        """`agents`: the folders of the other agents (None: one agent, every session works here)."""
        self.owner = owner
        self.guests = guests
        self.scratch_root = scratch
        self._guards: dict[str, WorkspaceGuard] = {OWNER: owner}
        self._scratch: dict[str, Path] = {}
        self._agent_folders = agents
        self._agents: dict[str, Workspaces] = {}

    def of(self, session_key: str) -> "Workspaces":
        """The workspaces of the agent `session_key` belongs to (a sub-agent's: its parent's agent's):
        these for the default agent, another agent's own owner workspace and guests' folders otherwise."""
        return self.agent(agent_id_of(session_key))

    def agent(self, ident: str | None) -> "Workspaces":
        """The workspaces of the agent `ident` (None: the default agent's, these)."""
        if ident is None or self._agent_folders is None:
            return self
        found = self._agents.get(ident)
        if found is None:
            root, guests, scratch = self._agent_folders(ident)
            found = self._agents[ident] = Workspaces(WorkspaceGuard(root), guests, scratch)
        return found

    def root(self, user: str) -> Path:
        """The workspace root of `user` (OWNER: the owner's), without creating it."""
        return self.owner.root if user == OWNER else self.guests / folder_name(user)

    def guard(self, user: str) -> WorkspaceGuard:
        """The guard confining `user`'s file access to their own root."""
        guard = self._guards.get(user)
        if guard is None:
            self.guests.mkdir(parents=True, exist_ok=True, mode=0o700)
            guard = self._guards[user] = WorkspaceGuard(self.root(user))
        return guard

    def scratch(self, user: str) -> Path:
        """`user`'s exec HOME and TMPDIR parent (created 0700 once): outside every workspace."""
        known = self._scratch.get(user)
        if known is not None and known.is_dir():
            return known
        folder = self.scratch_root / ("owner" if user == OWNER else "guest-" + folder_name(user))
        for sub in (folder, folder / "home", folder / "tmp"):
            sub.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(folder, 0o700)
        self._scratch[user] = folder
        return folder
