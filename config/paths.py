"""Where everything lives under CLAWGATE_HOME; one place so no module invents a path."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping


@dataclass(frozen=True)
class Paths:
    home: Path

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Paths":
        environ = os.environ if environ is None else environ
        raw = environ.get("CLAWGATE_HOME") or "~/.clawgate"
        return cls(Path(raw).expanduser().absolute())

    @property
    def config_file(self) -> Path:
        return self.home / "config.toml"

    @property
    def default_workspace(self) -> Path:
        return self.home / "workspace"

    @property
    def guest_workspaces(self) -> Path:
        """Each guest's own workspace, one folder per person (workspace/users.py)."""
        return self.home / "workspaces"

    @property
    def exec_scratch(self) -> Path:
        """exec's HOME and TMPDIR, one folder per person, outside every workspace."""
        return self.state / "exec"

    @property
    def state(self) -> Path:
        return self.home / "state"

    @property
    def sessions(self) -> Path:
        return self.state / "sessions"

    @property
    def traces(self) -> Path:
        return self.state / "traces"

    @property
    def tasks(self) -> Path:
        return self.state / "tasks"

    @property
    def checkpoints(self) -> Path:
        """Checkpoints, branch tapes and the workspace's content store (outside the workspace on purpose)."""
        return self.state / "checkpoints"

    @property
    def subagents(self) -> Path:
        """Background sub-agents started and not yet reported (one JSON file each)."""
        return self.state / "subagents"

    @property
    def audit_log(self) -> Path:
        return self.state / "audit.jsonl"

    @property
    def database(self) -> Path:
        return self.state / "clawgate.db"

    @property
    def written_ledger(self) -> Path:
        """Hashes of the workspace files the agent wrote itself (outside the workspace on purpose)."""
        return self.state / "written.json"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def log_file(self) -> Path:
        """The daemon's log when `log.file` is on; rotated copies sit beside it as clawgate.log.1 …"""
        return self.logs / "clawgate.log"

    @property
    def pid_file(self) -> Path:
        return self.state / "gateway.pid"

    @property
    def gateway_token_file(self) -> Path:
        """The daemon's generated gateway token, used when config has no gateway.token."""
        return self.state / "gateway.token"

    def ensure(self) -> None:
        """Create the state folders user-only (0700): they hold conversations and tokens."""
        for folder in (self.home, self.state, self.sessions, self.traces, self.tasks, self.checkpoints):
            folder.mkdir(parents=True, exist_ok=True)
            os.chmod(folder, 0o700)
