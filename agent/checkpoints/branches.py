"""Reading a session's log files as branches: the live log and the ones set aside beside it.

A restore moves the live log aside as `<stem>.<time>.abandoned` (an abandoned branch; a reset
archives as `<stem>.<time>.archived`). A checkpoint names its point by seq and by the
timestamp of the record there, so whichever of these files holds that exact record is found.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from ..session import Record, session_file_name

_HEAD = re.compile(rb'^\{"seq":(\d+),"ts":([0-9.eE+-]+)')


def log_files(folder: Path, key: str) -> list[Path]:
    """The live log first, then logs set aside for this key, newest first."""
    live = folder / session_file_name(key)
    stem = live.name[: -len(".jsonl")]
    pattern = re.compile(re.escape(stem) + r"\.\d{8}T\d{6}(\.\d+)?\.(abandoned|archived)$")
    aside = sorted((p for p in folder.glob(stem + ".*") if pattern.match(p.name)), key=lambda p: p.stat().st_mtime,
                   reverse=True)
    return ([live] if live.exists() else []) + aside


def cut(raw: bytes, seq: int, anchor_ts: float | None) -> int | None:
    """Byte length of the prefix that ends with record `seq` (whose ts is `anchor_ts`); None: not here."""
    if seq == 0:
        return 0
    pos = 0
    while pos < len(raw):
        newline = raw.find(b"\n", pos)
        end = len(raw) if newline == -1 else newline + 1
        line = raw[pos:end]
        match = _HEAD.match(line)
        if match:
            line_seq, ts = int(match.group(1)), float(match.group(2))
        else:
            try:
                record = json.loads(line)
                line_seq, ts = int(record.get("seq", -1)), float(record.get("ts", -1))
            except (ValueError, TypeError, AttributeError):
                pos = end
                continue
        if line_seq == seq:
            return end if anchor_ts is None or abs(ts - anchor_ts) < 1e-6 else None
        if line_seq > seq:
            return None
        pos = end
    return None


def locate(folder: Path, key: str, seq: int, anchor_ts: float | None) -> tuple[Path, bytes, int] | None:
    """(file, its bytes, prefix length) of the first log holding the point; None when none does."""
    for path in log_files(folder, key):
        raw = path.read_bytes()
        length = cut(raw, seq, anchor_ts)
        if length is not None:
            return path, raw, length
    return None


def records(raw: bytes) -> list[Record]:
    out: list[Record] = []
    for line in raw.splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except (ValueError, UnicodeDecodeError):
                continue
    return out


def record_line(seq: int, kind: str, **fields: Any) -> bytes:
    record = {"seq": seq, "ts": round(time.time(), 3), "kind": kind, **fields}
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def aside_name(live: Path) -> Path:
    stem = live.name[: -len(".jsonl")]
    return live.with_name(f"{stem}.{time.strftime('%Y%m%dT%H%M%S')}.{int(time.time() * 1000) % 1000:03d}.abandoned")
