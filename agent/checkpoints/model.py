"""One checkpoint as stored: JSON (never pickle) with a schema version and a checksum.

A checkpoint names a point in a session's log (`seq`, plus the timestamp of the record at
that seq, so the right log file is found even after restores and resets) and carries the
snapshot of what is not in the log: the task's state, drift counters, the workspace tree.
The conversation itself is the log's prefix up to `seq`, projected again on restore.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field, fields
from typing import Any

from ..core.errors import Conflict

SCHEMA = 1


@dataclass
class Checkpoint:
    session: str
    seq: int
    anchor_ts: float | None  # ts of the record at `seq` (None: the empty log)
    kind: str  # turn | step | auto | manual
    description: str
    time: float
    turn: int
    version: str
    id: str = field(default_factory=lambda: "cp_" + uuid.uuid4().hex[:12])
    parent: str | None = None
    task: str | None = None
    step: int | None = None
    verified: bool = False
    snapshot: dict[str, Any] = field(default_factory=dict)
    schema: int = SCHEMA

    def summary(self) -> dict[str, Any]:
        """As lists show it (camelCase like every gateway payload; the snapshot left out)."""
        return {"id": self.id, "parent": self.parent, "session": self.session, "task": self.task, "step": self.step,
                "verified": self.verified, "turn": self.turn, "seq": self.seq, "time": self.time, "kind": self.kind,
                "description": self.description, "version": self.version, "schema": self.schema,
                "filesChanged": self.snapshot.get("changedCount")}


class CheckpointRefused(Conflict):
    """A checkpoint that must not be loaded (corrupt, or from a newer schema): one line, never loaded."""


def encode(cp: Checkpoint) -> bytes:
    """The canonical form with the checksum appended as a last key: serialised once per checkpoint
    (one is written before every user message). The snapshot is JSON data already, not copied."""
    canonical = _canonical({name: getattr(cp, name) for name in _FIELDS})
    checksum = "sha256:" + hashlib.sha256(canonical).hexdigest()
    return canonical[:-1] + b',"checksum":"' + checksum.encode() + b'"}'


def decode(raw: bytes, *, name: str) -> Checkpoint:
    """Parse and verify; raises CheckpointRefused naming the problem and what to do."""
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise CheckpointRefused(f"checkpoint {name} is corrupt (not valid JSON); it was not loaded — "
                                "choose another one from `clawgate checkpoints list`") from None
    if not isinstance(body, dict):
        raise CheckpointRefused(f"checkpoint {name} is corrupt (not a JSON object); it was not loaded")
    schema = body.get("schema")
    if isinstance(schema, int) and schema > SCHEMA:
        raise CheckpointRefused(f"checkpoint {name} has schema version {schema}, newer than this clawgate reads "
                                f"({SCHEMA}); it was not loaded — upgrade clawgate to use it")
    checksum = body.pop("checksum", None)
    if checksum != _checksum(body):
        raise CheckpointRefused(f"checkpoint {name} is corrupt (checksum mismatch); it was not loaded — "
                                "choose another one from `clawgate checkpoints list`")
    try:
        return Checkpoint(**body)
    except TypeError:
        raise CheckpointRefused(f"checkpoint {name} is corrupt (unexpected fields); it was not loaded") from None


def _checksum(body: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(_canonical(body)).hexdigest()


def _canonical(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


_FIELDS = tuple(f.name for f in fields(Checkpoint))
