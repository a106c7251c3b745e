"""Why an `exec` argv needs the user's approval: the argument checks, exec's second layer.

The sandbox (sandbox.py) is what keeps a program inside the workspace; these checks decide
which calls run without asking, and they still hold where no sandbox is available. They refuse
to guess where enumeration is impossible: an option that makes a program read file *names*
from a file, follow symlinks while walking folders, or start another program needs approval.

Options are parsed as GNU getopt does, as far as it matters: a long option may be any prefix
(`--files0` means `--files0-from`), short options cluster (`-LR`), and a short option that
takes a value ends its cluster or consumes the next argument (`grep -e -R` searches for "-R").
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from clawgate.workspace.guard import PathOutsideWorkspace, WorkspaceGuard

_NAMES_FROM_FILE = "reads the names of files to open from a file, which these checks cannot see into"
_FOLLOWS_LINKS = "follows symlinks inside folders, which may lead out of the workspace"
_RUNS_PROGRAM = "makes {program} run another program"


@dataclass(frozen=True)
class ProgramOptions:
    """How one program's options are read: which short letters take a value, which need approval."""

    takes_value: str = ""  # short options with a required value (rest of the cluster, or the next argument)
    optional_value: str = ""  # short options whose value, if any, is the rest of the cluster (date -Iseconds)
    risky_short: dict[str, str] = field(default_factory=dict)  # letter -> why it needs approval
    risky_long: dict[str, str] = field(default_factory=dict)  # --name -> why


# The default allowlist (config/schema.py) reviewed one by one. Not listed, nothing risky beyond
# paths: cat head tail pwd echo true uniq stat which (stat -L / file -L follow only the named
# paths, which the path checks resolve). tar is here for allowlists that add it.
OPTIONS: dict[str, ProgramOptions] = {
    "sort": ProgramOptions("koSTt", risky_long={"--files0-from": _NAMES_FROM_FILE,
                                                 "--compress-program": _RUNS_PROGRAM}),
    "wc": ProgramOptions(risky_long={"--files0-from": _NAMES_FROM_FILE}),
    "du": ProgramOptions("BdtX", risky_short={"L": _FOLLOWS_LINKS},
                         risky_long={"--files0-from": _NAMES_FROM_FILE, "--dereference": _FOLLOWS_LINKS}),
    "ls": ProgramOptions("ITw", risky_short={"L": _FOLLOWS_LINKS}, risky_long={"--dereference": _FOLLOWS_LINKS}),
    "grep": ProgramOptions("efmABCdD", risky_short={"R": _FOLLOWS_LINKS},
                           risky_long={"--dereference-recursive": _FOLLOWS_LINKS}),
    "diff": ProgramOptions("CUDFISWxXL", risky_short={"r": _FOLLOWS_LINKS}, risky_long={"--recursive": _FOLLOWS_LINKS}),
    "file": ProgramOptions("efFmP", risky_short={"f": _NAMES_FROM_FILE}, risky_long={"--files-from": _NAMES_FROM_FILE}),
    "date": ProgramOptions("dfrs", "I", risky_short={"s": "sets the system clock"},
                           risky_long={"--set": "sets the system clock"}),
    "tar": ProgramOptions("bCfFgHIKLNTVX", risky_short={"T": _NAMES_FROM_FILE, "I": _RUNS_PROGRAM, "F": _RUNS_PROGRAM},
                          risky_long={"--files-from": _NAMES_FROM_FILE, "--to-command": _RUNS_PROGRAM,
                                      "--use-compress-program": _RUNS_PROGRAM, "--checkpoint-action": _RUNS_PROGRAM,
                                      "--info-script": _RUNS_PROGRAM, "--new-volume-script": _RUNS_PROGRAM,
                                      "--rsh-command": _RUNS_PROGRAM, "--rmt-command": _RUNS_PROGRAM}),
}


def option_problem(program: str, args: list[str]) -> str | None:
    """Why an option in `args` (argv[1:]) needs approval for `program`, or None."""
    spec = OPTIONS.get(program)
    if spec is None:
        return None
    if program == "tar" and args and not args[0].startswith("-"):
        # Old-style bundle (`tar cfT a.tar list`): every letter is an option, values follow it.
        for letter in args[0]:
            if letter in spec.risky_short:
                return f"option {args[0]!r} (-{letter}) {spec.risky_short[letter].format(program=program)}"
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == "--":
            break
        if arg.startswith("--"):
            name = arg.split("=", 1)[0]
            for option, why in spec.risky_long.items():
                if len(name) > 2 and option.startswith(name):
                    return f"option {arg!r} ({option}) {why.format(program=program)}"
        elif arg.startswith("-") and len(arg) > 1:
            for k, letter in enumerate(arg[1:], start=1):
                if letter in spec.risky_short:
                    return f"option {arg!r} (-{letter}) {spec.risky_short[letter].format(program=program)}"
                if letter in spec.takes_value:
                    skip = k == len(arg) - 1  # `-e PATTERN`: the next argument is the value
                    break
                if letter in spec.optional_value:
                    break
    return None


def operand_problem(program: str, args: list[str], cwd: Path) -> str | None:
    """diff compares the files inside folder operands and follows symlinks found there."""
    if program != "diff":
        return None
    for arg in args:
        if not arg.startswith("-") and os.path.isdir(os.path.join(cwd, arg)):
            return f"diff of folder {arg!r} {_FOLLOWS_LINKS}"
    return None


def inside(guard: WorkspaceGuard, path: str) -> bool:
    try:
        guard.resolve(path)
    except PathOutsideWorkspace:
        return False
    return True


def _path_candidates(arg: str) -> list[str]:
    """The argument itself, what follows each '=' (--file=/x), and short-option values (-o/x, -no/x)."""
    candidates = [arg] + [arg[i + 1 :] for i, ch in enumerate(arg) if ch == "="]
    if arg.startswith("-") and not arg.startswith("--"):
        k = 2
        while k < len(arg) and arg[1:k].isalnum():
            candidates.append(arg[k:])
            k += 1
    return candidates


def path_problem(arg: str, cwd: Path, guard: WorkspaceGuard) -> str | None:
    """Why `arg` may reach outside the workspace when read as a path from `cwd`, or None."""
    if "\x00" in arg:
        return f"argument {arg!r} contains a NUL byte"
    for candidate in _path_candidates(arg):
        if candidate.startswith("~"):
            return f"argument {arg!r} refers to a home-directory path ({candidate!r}) outside the workspace"
        joined = os.path.join(cwd, candidate)
        try:
            if inside(guard, joined):
                continue
            real = os.path.realpath(joined)
        except (OSError, ValueError):
            return f"argument {arg!r} could not be checked as a path inside the workspace"
        shown = f"{arg!r}" if candidate == arg else f"{arg!r} (path {candidate!r})"
        return f"argument {shown} refers to {real}, outside the workspace {guard.root}"
    return None
