"""Checkpoints and time travel: restore or fork any run at any point (docs/checkpoints.md)."""

from .model import SCHEMA, Checkpoint, CheckpointRefused
from .replay import ReplayProvider, Tapes, ToolReplay
from .service import MODES, CheckpointService
from .store import CheckpointStore
from .workspace_store import WorkspaceStore

__all__ = ["SCHEMA", "MODES", "Checkpoint", "CheckpointRefused", "CheckpointService", "CheckpointStore",
           "ReplayProvider", "Tapes", "ToolReplay", "WorkspaceStore"]
