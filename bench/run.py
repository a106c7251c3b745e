"""Run every benchmark in turn and print their tables (`make bench`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = ["core_bench.py", "telegram_bench.py", "context_bench.py", "triggers_bench.py", "recovery_bench.py",
           "checkpoint_bench.py", "session_bench.py", "drift_eval.py", "fleet.py", "browser_bench.py",
           "agents_bench.py"]


def main() -> int:
    failed = 0
    for name in BENCHES:
        print(f"\n== {name} ==", flush=True)
        failed |= subprocess.call([sys.executable, str(HERE / name)], cwd=HERE.parent) != 0
    return failed


if __name__ == "__main__":
    sys.exit(main())
