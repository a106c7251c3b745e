"""`clawgate logs [--follow] [--json] [-n N]`: the daemon's log file, already masked when written.

Reads $CLAWGATE_HOME/logs/clawgate.log (and its rotated copies for older lines). `--follow`
keeps printing new lines and survives rotation: when the file is replaced or shrinks, it
starts again at the top of the new one.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import deque
from pathlib import Path
from typing import Any, Iterable, TextIO

from .errors import EXIT_FAILED, CliError
from .output import JSON_HELP

POLL_SECONDS = 0.25


def _older_first(log_file: Path) -> list[Path]:
    backups = sorted(log_file.parent.glob(log_file.name + ".*"),
                     key=lambda p: int(p.suffix[1:]) if p.suffix[1:].isdigit() else 0, reverse=True)
    return [p for p in backups if p.suffix[1:].isdigit()] + [log_file]


def _emit(line: str, as_json: bool) -> None:
    from ..logs import parse_line

    line = line.rstrip("\n")
    print(json.dumps(parse_line(line), ensure_ascii=False) if as_json else line, flush=True)


def _tail(files: Iterable[Path], count: int) -> list[str]:
    last: deque[str] = deque(maxlen=count)
    for path in files:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                last.extend(fh)
        except FileNotFoundError:
            continue
    return list(last)


def _follow(log_file: Path, fh: TextIO, as_json: bool) -> None:
    """Print lines as they are appended; reopen when the file is rotated (new inode) or truncated."""
    partial = ""
    inode = os.fstat(fh.fileno()).st_ino
    while True:
        chunk = fh.readline()
        if chunk:
            partial += chunk
            if partial.endswith("\n"):
                _emit(partial, as_json)
                partial = ""
            continue
        time.sleep(POLL_SECONDS)
        try:
            current = os.stat(log_file)
        except FileNotFoundError:
            continue  # between the rename and the new file
        if current.st_ino != inode or current.st_size < fh.tell():
            fh.close()
            fh = open(log_file, encoding="utf-8", errors="replace")
            inode = os.fstat(fh.fileno()).st_ino


def cmd_logs(args: argparse.Namespace) -> int:
    from clawgate.config.loader import load

    paths, settings = load()
    log_file = paths.log_file
    if not log_file.exists():
        hint = "" if settings.log.file else "set log.file = true under [log] in config.toml (or CLAWGATE_LOG__FILE=true), "
        raise CliError(f"no log file at {log_file}; {hint}restart the gateway (a service's output is also in "
                       "`journalctl --user -u clawgate`)", EXIT_FAILED)
    fh = open(log_file, encoding="utf-8", errors="replace")
    try:
        # The current file through `fh` itself, so following starts exactly where the tail ended.
        last: deque[str] = deque(_tail(_older_first(log_file)[:-1], args.lines), maxlen=max(args.lines, 0))
        last.extend(fh.readlines())
        for line in last:
            _emit(line, args.json)
        if args.follow:
            _follow(log_file, fh, args.json)
    finally:
        fh.close()
    return 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser("logs", help="print the daemon's log file (log.file = true)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines (Ctrl-C to stop)")
    p.add_argument("--json", action="store_true", help=JSON_HELP + "; one object per line: ts, level, logger, message")
    p.add_argument("-n", "--lines", type=int, default=200, help="how many of the last lines to print first (default 200)")
    p.set_defaults(fn=cmd_logs)
