"""Session log append cost by history length: appends must stay O(1) as the log grows.

In-process on a temp folder, fsync off (the cost of the projection and the write, not of the disk).
Prints the best-of-three per-append time at a short and a long history and their ratio; the
test suite checks the same property without a clock (tests/unit/agent/test_session.py: one write, nothing read).
Usage: python bench/session_bench.py [--fill N] [--batch N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from clawgate.agent.session import Session, SessionManager  # noqa: E402


def per_append(session: Session, batch: int) -> float:
    """Best of three batches, in seconds per append: robust to a busy machine."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for i in range(batch):
            session.append("event", name="x", i=i)
        best = min(best, (time.perf_counter() - start) / batch)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fill", type=int, default=9000, help="records appended between the two measurements")
    parser.add_argument("--batch", type=int, default=300, help="appends per measured batch")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        session = SessionManager(Path(tmp), fsync=False).get("bench")
        early = per_append(session, args.batch)
        for i in range(args.fill):
            session.append("event", name="fill", i=i)
        late = per_append(session, args.batch)
    print(f"| records already in the log | µs per append |\n|---|---|\n| 0 | {early * 1e6:.1f} |\n"
          f"| {3 * args.batch + args.fill:,} | {late * 1e6:.1f} |")
    print(f"ratio late/early: {late / early:.2f} (O(1) appends keep it near 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
