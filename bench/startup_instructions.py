"""Start-up to the ready line in instructions executed: this tree beside an earlier revision.

Wall and CPU times of a start swing with the shared machine's load by more than a change to what
the daemon imports; the number of instructions it executes from launch to its ready line does
not (two runs of the same code differ by under 0.1 %). Each tree's daemon runs once under
valgrind's callgrind on a fresh `init` home with the benches' settings, and ends itself inside
the print of its ready line (`os._exit` from a `sitecustomize` put first on PYTHONPATH), so
nothing after ready is counted. Both trees are compiled to bytecode first (an edited module
compiled from source at the measured start would count its compilation); the earlier revision is
exported and made importable as bench/versus.py does.

Usage: python bench/startup_instructions.py [--rev main]   (needs valgrind; ~1 min per tree on a
quiet machine, several on a busy one)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from versus import ROOT, compile_bytecode, export, importable  # noqa: E402

EXIT_AT_READY = '''
import builtins, os, sys
_print = builtins.print
def _exit_at_ready(*args, **kwargs):
    _print(*args, **kwargs)
    if args and "gateway ready" in str(args[0]):
        sys.stdout.flush()
        os._exit(0)
builtins.print = _exit_at_ready
'''
SETTINGS = {"CLAWGATE_GATEWAY__TOKEN": "t" * 32, "CLAWGATE_LOG__LEVEL": "warning", "ANTHROPIC_API_KEY": "test-key",
            "ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "CLAWGATE_DRIFT__ENABLED": "false",
            "CLAWGATE_REFLECTION__ENABLED": "false"}


def count(tree: Path, path: Path | None, hook: Path, folder: Path) -> int:
    """Instructions from the daemon's launch to its ready line, `tree`'s code on a fresh home."""
    home = folder / f"home-{tree.name}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAWGATE_", "PYTHONPATH"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(SETTINGS, CLAWGATE_HOME=str(home), PYTHONPATH=os.pathsep.join(str(p) for p in (hook, path) if p))
    subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", "init", "--yes"], env=env, cwd=tree, check=True,
                   capture_output=True)
    out = folder / f"callgrind-{tree.name}.out"
    done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-m",
                           "clawgate.gateway.cli", "gateway", "--port", "0"], env=env, cwd=tree,
                          capture_output=True, text=True, timeout=1800)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if "gateway ready" not in done.stdout or found is None:
        raise SystemExit(f"the daemon of {tree} did not reach its ready line under valgrind:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="main")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed; install it (apt-get install valgrind) to count instructions")
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        hook = folder / "hook"
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(EXIT_AT_READY)
        old = folder / "tree"
        old.mkdir()
        export(args.rev, old)
        old_path = importable(old, folder / "path")
        for tree in (ROOT, old):
            compile_bytecode(tree)
        new_count = count(ROOT, None, hook, folder)
        old_count = count(old, old_path, hook, folder)
    print(f"instructions from launch to the ready line: this tree {new_count:,}, {args.rev} {old_count:,} "
          f"({(new_count - old_count) / old_count:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
